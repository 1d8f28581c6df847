"""The run dashboard: `segue dashboard`, or `create_app(store, tenant=...)` as a WSGI app for any server."""

from segue.apps.dashboard.app import DashboardApp, create_app
from segue.apps.dashboard.server import RunningDashboard, serve, serve_in_thread
from segue.apps.dashboard.views import CostFn, no_pricing

__all__ = ["CostFn", "DashboardApp", "RunningDashboard", "create_app", "no_pricing", "serve", "serve_in_thread"]
