"""Every chart on the dashboard names both of its axes, with a unit where there is one."""

from __future__ import annotations

from app.ui.dashboard.dashboard import Dashboard


def test_every_dashboard_chart_names_its_axes(qtbot):
    dash = Dashboard()
    qtbot.addWidget(dash)
    charts = [*dash.charts.values(), dash.history.chart]
    for chart in charts:
        assert chart.x_axis and chart.y_axis, chart.title
    assert dash.rate.y_axis == "tokens/s", "the speed chart's up axis is tokens a second"
    assert dash.rate.x_axis == "time (s)", "the speed chart's across axis is time in seconds"
    assert dash.history.chart.y_axis == "speedup (×)"
    dash.rate.set_data([(0.0, 10.0), (1.0, 20.0)], 12.0)
    dash.rate.resize(320, 200)
    assert dash.rate.png()  # paints with the axis titles without error
