"""Every API route, gathered for the application."""

from starlette.routing import Route

from cascade_http.routes import admin, campaigns, gpu_configs, runners, runs, session, sims, sql, traces

all_routes: list[Route] = [
    *traces.routes, *runs.routes, *gpu_configs.routes, *sims.routes, *runners.routes, *admin.routes, *sql.routes, *campaigns.routes,
    *session.routes,
]
