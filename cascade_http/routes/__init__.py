"""Every API route, gathered for the application."""

from starlette.routing import Route

from cascade_http.routes import admin, campaigns, runners, runs, sims, sql, traces

all_routes: list[Route] = [*traces.routes, *runs.routes, *sims.routes, *runners.routes, *admin.routes, *sql.routes, *campaigns.routes]
