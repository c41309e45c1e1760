"""smg 1.13 (the SGLang Model Gateway, formerly SGLang Router): `python -m smg.launch_router`, title `smg::router`.

Differences from sglang-router 0.3.2 that pdctl acts on (shared/reference/smg-1.13.md): POST /workers for a URL
still listed is 409 WORKER_ALREADY_EXISTS; a deleted worker stays listed as `draining` (unhealthy) for ~5 s;
`GET /workers` says each worker's `status`; `smg_worker_cb_state` shows an open breaker while /readiness is ready;
SIGTERM drains ~5 s even when idle."""

from pdctl.routers import RouterKind, register

KIND: RouterKind = register(
    RouterKind(
        name="smg",
        module="smg.launch_router",
        package="smg",
        dist="smg",
        title="smg::router",
        stop_grace_s=30.0,
        readd_conflict=True,
        delete_drains=True,
        breaker_metric="smg_worker_cb_state",
        lists_status=True,
    )
)
