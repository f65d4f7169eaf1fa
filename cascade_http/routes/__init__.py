"""Every API route, gathered for the application."""

from starlette.routing import Route

all_routes: list[Route] = []
