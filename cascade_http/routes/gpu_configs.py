"""GPU config variants: derive one, show a config, and how two configs differ.

Commands and reads are `cascade_app.gpu_configs`; listing the configs is the Runs API's
(`routes/runs.py`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_app import gpu_configs
from cascade_core.gpu_configs import GpuConfig
from cascade_core.variants import ConfigDerive, OptionDifference
from cascade_http.bodies import json_body
from cascade_http.openapi import operation
from cascade_http.responses import MsgspecResponse
from cascade_http.state import cascade

NO_CONFIG = {404: "No config a run may name has this name."}
NO_FILES = "The config's files are not on this server (neither its Accel-Sim install's nor a variant's)."


@operation(
    summary="Derive a GPU config",
    description="A variant: the base config's files with `options` set in its gpgpusim.config (a line of the "
    "option replaced, or the option appended), stored in the object store; runners that have the base fetch them "
    "with a sim's launch. Each option must be one GPGPU-Sim knows (as its builds' option dumps list them), its "
    "value of that option's type, and none may break a rule GPGPU-Sim aborts on (the IPOLY set-index hash takes "
    "16, 32 or 64 sets). Deriving the same variant again answers it unchanged.",
    body=ConfigDerive,
    response=GpuConfig,
    status=201,
    errors={
        400: "The body is not parsable.",
        404: "base names no config a run may name.",
        409: "Another config has this name.",
        422: "An option is unknown, its value is not of its type or breaks a rule (the message names it), the base's "
        "files are not on this server, or the body fails validation.",
    },
)
async def derive_config(request: Request) -> Response:
    body = await json_body(request, ConfigDerive)
    derived = await gpu_configs.derive_config(cascade(request), name=body.name, base=body.base, options=body.options)
    return MsgspecResponse(derived, status_code=201)


@operation(summary="Get a GPU config", description="A variant says its base and options.", response=GpuConfig, errors=NO_CONFIG)
async def get_config(request: Request) -> Response:
    return MsgspecResponse(await gpu_configs.show_config(cascade(request), request.path_params["name"]))


@operation(
    summary="Get a GPU config's options",
    description="Every option its gpgpusim.config sets, by name (a variant's: its base's, with its own).",
    response=dict[str, str],
    errors={**NO_CONFIG, 422: NO_FILES},
)
async def get_config_options(request: Request) -> Response:
    return MsgspecResponse(await gpu_configs.config_options(cascade(request), request.path_params["name"]))


@operation(
    summary="Compare two GPU configs",
    description="The options the two configs' gpgpusim.config files set differently, sorted by option: each one's "
    "value in `a` and in `b` (null: not set there).",
    response=list[OptionDifference],
    errors={**NO_CONFIG, 422: NO_FILES},
)
async def diff_configs(request: Request) -> Response:
    params = request.path_params
    return MsgspecResponse(await gpu_configs.config_diff(cascade(request), params["a"], params["b"]))


routes = [
    Route("/api/gpu-configs", derive_config, methods=["POST"]),
    Route("/api/gpu-configs/{name}", get_config, methods=["GET"]),
    Route("/api/gpu-configs/{name}/options", get_config_options, methods=["GET"]),
    Route("/api/gpu-configs/{a}/diff/{b}", diff_configs, methods=["GET"]),
]
