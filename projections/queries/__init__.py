"""Reads of the read model, answered as the API's Structs: one module per aggregate."""
