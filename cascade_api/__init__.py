"""The public API's schemas: what the routes take and answer.

msgspec Structs, the single definition of every body Cascade serves or accepts; the HTTP layer
encodes them, request validation reads their constraints, and the OpenAPI document is derived
from them.
"""
