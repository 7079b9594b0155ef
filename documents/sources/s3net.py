"""Where a bucket source's requests may go (docs/sources.md, "S3-compatible buckets").

An endpoint's host is resolved with a deadline (``documents/outbound.py``), and every address
it resolves to must be on the public internet, in one of the operator's
``SOURCES_S3_ALLOWED_NETWORKS``, or anything at all with ``SOURCES_S3_ALLOW_PRIVATE``. The
stage's boto3 client then connects to the very address that was checked (:func:`pin`): its
requests go through a session of our own (boto3's ``before-send`` event) whose connections open
a socket to that address while the ``Host`` header, the signature and the TLS name (SNI and
certificate check) stay the endpoint's host. A DNS answer that changes between the check and a
connection (rebinding) is never asked for. A connection to any other host is refused, and no
proxy from the environment is used (a proxy would make its own lookup).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from django.conf import settings

from documents.outbound import Network, in_networks, is_public, networks_of


def allowed_networks() -> tuple[Network, ...]:
    """The operator's ``SOURCES_S3_ALLOWED_NETWORKS`` (an entry that is not a network allows nothing)."""
    return networks_of(settings.SOURCES_S3_ALLOWED_NETWORKS)


def allowed(address: str, networks: tuple[Network, ...]) -> bool:
    return settings.SOURCES_S3_ALLOW_PRIVATE or is_public(address) or in_networks(address, networks)


def _bare(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def _pinned_session(host: str, address: str) -> Any:
    """A botocore HTTP session whose every connection goes to ``address`` (for ``host`` only)."""
    from botocore.awsrequest import (
        AWSHTTPConnection,
        AWSHTTPConnectionPool,
        AWSHTTPSConnection,
        AWSHTTPSConnectionPool,
    )
    from botocore.httpsession import URLLib3Session
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
    from urllib3.util.connection import create_connection

    def new_conn(connection: Any) -> socket.socket:
        """The connection's socket, to the checked address; everything else about the connection
        (Host header, SNI, certificate check) is the endpoint host's."""
        if _bare(connection.host) != host:
            raise NewConnectionError(connection, "refused: not the bucket's checked endpoint")
        try:
            return create_connection(
                (address, connection.port),
                connection.timeout,
                source_address=connection.source_address,
                socket_options=connection.socket_options,
            )
        except TimeoutError as error:
            raise ConnectTimeoutError(connection, "connecting to the endpoint timed out") from error
        except OSError as error:  # the words name no address: they may reach a log
            failed = f"connecting to the endpoint failed: {error.strerror}"
            raise NewConnectionError(connection, failed) from error

    # urllib3 opens a connection's socket in ``_new_conn`` (its own lookup of the host).
    pinned_http = type("PinnedHTTP", (AWSHTTPConnection,), {"_new_conn": new_conn})
    pinned_https = type("PinnedHTTPS", (AWSHTTPSConnection,), {"_new_conn": new_conn})
    http_pool = type("PinnedHTTPPool", (AWSHTTPConnectionPool,), {"ConnectionCls": pinned_http})
    https_pool = type("PinnedHTTPSPool", (AWSHTTPSConnectionPool,), {"ConnectionCls": pinned_https})

    session = URLLib3Session(
        verify=os.environ.get("AWS_CA_BUNDLE") or True,
        proxies={},
        timeout=(settings.SOURCES_S3_CONNECT_TIMEOUT, settings.SOURCES_S3_READ_TIMEOUT),
    )
    # The session's pool manager holds this very mapping: its pools are made of pinned connections.
    session._pool_classes_by_scheme.update({"http": http_pool, "https": https_pool})
    session._manager.pool_classes_by_scheme = session._pool_classes_by_scheme
    return session


def pin(client: Any, endpoint_host: str, address: str) -> None:
    """Send every request of ``client`` (made for an endpoint on ``endpoint_host``) to the
    checked ``address``."""
    session = _pinned_session(_bare(endpoint_host), address)

    def send(request: Any, **kwargs: Any) -> Any:
        return session.send(request)

    client.meta.events.register("before-send.s3", send)
