"""The web pages: the trader view at ``/``, the operator view at ``/admin`` and their files
under ``/web/``, all shipped inside the package (no build step, nothing fetched at run time).

Every page and file goes out with a strict Content-Security-Policy: scripts and styles only
from this server, no inline script, style or handler, requests only to this server."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import PurePosixPath

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

STATIC_PREFIX = "/web/"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".LICENSE": "text/plain; charset=utf-8",
    ".NOTICE": "text/plain; charset=utf-8",
}
_REFUSED_OFF_LOOPBACK = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>tradehall operator view</title>"
    "<h1>Not available from here</h1><p>The operator view answers loopback callers only. To"
    " open it to other addresses, set <code>admin_remote = true</code> under"
    " <code>[server]</code> in the configuration (the admin token is still required).</p>"
)


def _load_files() -> dict[str, tuple[bytes, str]]:
    """Every shipped file by its path under static/ (``vendor/x.js``), with its media type."""
    files: dict[str, tuple[bytes, str]] = {}

    def walk(folder: resources.abc.Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
                continue
            media = _TYPES.get(PurePosixPath(entry.name).suffix)
            if media is not None:
                files[prefix + entry.name] = (entry.read_bytes(), media)

    walk(resources.files("tradehall.web") / "static", "")
    return files


def _answer(body: bytes, media: str, status: int = 200) -> Response:
    headers = dict(SECURITY_HEADERS)
    # The pages change with the installed version only; the data comes from the API.
    headers["cache-control"] = "no-cache"
    return Response(body, status_code=status, media_type=media, headers=headers)


SELF_SERVICE_MARK = (b"<body>", b'<body data-self-service="on">')
"""The trader page's ``<body>`` when the server offers self-service accounts: the page shows
"Create a test account" (without asking an endpoint that answers 404 when they are off)."""


def routes(
    *,
    trader: bool = True,
    operator_allowed: Callable[[Request], bool] | None = None,
    self_service: bool = False,
) -> list[Route]:
    """The pages' files; the trader's page unless ``trader`` is False (the engine process,
    which has no client API), marked when ``self_service`` accounts are offered, and the
    operator's page when ``operator_allowed`` is given (not on a gateway, which has no admin
    API): it says whether a request may open that page (the admin API's address rule, which
    the app mounting these routes knows)."""
    files = _load_files()
    if self_service:
        body, media = files["index.html"]
        files["index.html"] = (body.replace(*SELF_SERVICE_MARK, 1), media)

    async def trader_page(request: Request) -> Response:
        return _answer(*files["index.html"])

    async def operator_page(request: Request) -> Response:
        if operator_allowed is None or not operator_allowed(request):
            return _answer(_REFUSED_OFF_LOOPBACK.encode(), _TYPES[".html"], 403)
        return _answer(*files["admin.html"])

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        found = files.get(name)
        if found is None:
            raise HTTPException(404)
        return _answer(*found)

    return [
        *([Route("/", trader_page, methods=["GET"], include_in_schema=False)] if trader else []),
        *(
            [Route("/admin", operator_page, methods=["GET"], include_in_schema=False)]
            if operator_allowed is not None
            else []
        ),
        Route(STATIC_PREFIX + "{name:path}", static, methods=["GET"], include_in_schema=False),
    ]
