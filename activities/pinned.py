"""HTTP to an address the egress guard checked (:func:`memory.egress.checked_target`), never to a second
resolution of the name: a host that now resolves elsewhere (DNS rebinding) is never reached. Shared by the
reminder webhook and the webhook publish destination."""

from __future__ import annotations

import httpx

from memory.egress import Address, Target

DELIVERY_TIMEOUT_SECONDS = 10.0


def send_pinned(target: Target, method: str, body: bytes, headers: dict[str, str],
                timeout: float = DELIVERY_TIMEOUT_SECONDS) -> httpx.Response:
    """Send to a checked address itself, trying each in the resolver's order as a client's connect would; the
    Host header and the TLS name (SNI, certificate) stay the host's."""
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        for address in target.addresses[:-1]:
            try:
                return client.send(_request(client, target, address, method, body, headers, extensions))
            except httpx.ConnectError:
                continue
        return client.send(_request(client, target, target.addresses[-1], method, body, headers, extensions))


def _request(client: httpx.Client, target: Target, address: Address, method: str, body: bytes,
             headers: dict[str, str], extensions: dict[str, str]) -> httpx.Request:
    return client.build_request(method, target.pinned_url(address), content=body,
                                headers={**headers, "Host": target.host_header()}, extensions=extensions)
