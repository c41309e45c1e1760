"""sglang-router 0.3.2 (2026-01, its last release): `python -m sglang_router.launch_router`, title `sglang::router`.

Its worker API replaces a worker POSTed again and forgets a deleted one at once; `GET /workers` has no status and
its metrics carry no circuit-breaker state (its breaker opens all the same: `/health_generate` cannot show it)."""

from pdctl.routers import RouterKind, register

KIND: RouterKind = register(
    RouterKind(
        name="sglang-router",
        module="sglang_router.launch_router",
        package="sglang_router",
        dist="sglang-router",
        title="sglang::router",
        stop_grace_s=20.0,
        readd_conflict=False,
        delete_drains=False,
        breaker_metric=None,
        lists_status=False,
    )
)
