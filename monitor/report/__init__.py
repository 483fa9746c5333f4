"""The weekly failure-analysis report (``monitor report``, docs/report.md).

:mod:`~monitor.report.document` reads the store and builds the report document (``monitor.report/v1``, the JSON
Schema ``report.schema.json`` beside this file); :mod:`~monitor.report.render` renders it as self-contained HTML
(charts from :mod:`~monitor.report.charts`) and Markdown with the Jinja2 templates in ``templates/``, and as JSON
validated against the schema; :mod:`~monitor.report.webhook` posts a Slack-compatible summary.
"""
