import type { TokenContext } from '../token/token-service.ts';
import { networkMatcher, unmappedAddress } from '../support/network-matcher.ts';
import type { ForwardTarget } from './forwarder.ts';
import { forwardableHeaders, identityHeaderList } from './identity-headers.ts';
import { header, type ProxiedRequest } from './proxied-request.ts';
import type { PublicUrl } from './public-url.ts';
import { PreparedHeaders } from './upstream-pool.ts';
import { joinPath } from './upstream-paths.ts';

/** A user token's identity headers: as a list, and as lines checked and written once (when they can be sent). */
interface IdentityHeaders {
  list: string[];
  prepared: PreparedHeaders | undefined;
}

/** What the upstream receives: the canonical path, the client's headers minus forgeable ones, ours. */
export class UpstreamRequests {
  private readonly identityHeaderCache = new WeakMap<TokenContext, IdentityHeaders>();
  private readonly isTrustedProxy: (address: string) => boolean;

  constructor(
    private readonly publicUrl: PublicUrl,
    /**
     * TRUSTED_PROXIES: only a request whose socket peer is one of them has its X-Forwarded-For chain
     * kept (and extended) and its X-Forwarded-Proto / X-Forwarded-Host believed.
     */
    trustedProxies: readonly string[],
  ) {
    this.isTrustedProxy = networkMatcher(trustedProxies);
  }

  /** The request for `proxied` (routed, authenticated and resolved), with X-Service-Catalog when given. */
  build(proxied: ProxiedRequest, catalogHeader: string | undefined): ForwardTarget {
    const { request, requestId, route, caller } = proxied;
    const upstream = proxied.upstream!;
    const headers = forwardableHeaders(request.headers);
    const host = header(request, 'host');
    const peer = unmappedAddress(request.socket.remoteAddress ?? '');
    if (this.isTrustedProxy(peer)) {
      // Behind our own load balancer: its chain is kept and extended, its scheme, host and port
      // believed. (Its Forwarded is dropped all the same: see BELIEVED_HEADER_FAMILIES.)
      const chain = header(request, 'x-forwarded-for');
      headers.push(
        'x-forwarded-for',
        chain ? `${chain}, ${peer}` : peer,
        'x-forwarded-proto',
        header(request, 'x-forwarded-proto') ?? this.publicUrl.protocol(host),
        'x-forwarded-host',
        header(request, 'x-forwarded-host') ?? host ?? '',
      );
      const port = header(request, 'x-forwarded-port');
      if (port !== undefined) headers.push('x-forwarded-port', port);
    } else {
      // Anyone else: whatever the client wrote is replaced (forwardableHeaders dropped it).
      headers.push('x-forwarded-for', peer, 'x-forwarded-proto', this.publicUrl.protocol(host), 'x-forwarded-host', host ?? '');
    }
    headers.push('host', upstream.host, 'x-openstack-request-id', requestId);
    // So far: the client's headers as node's strict parser read them, and values made of those, of the
    // socket's address, of a URL's host and of our request id: nothing the pool would refuse, so it
    // does not test them again. What follows (names and values from the identity store) it does.
    const checkedHeaders = headers.length;
    // A user token's headers go as the lines written when it was first seen; with a service token
    // (or a value the pool will refuse) they go in the list, checked per request.
    let prepared: PreparedHeaders | undefined;
    if (caller!.service) pushAll(headers, identityHeaderList(caller!.user, caller!.service));
    else {
      const identity = this.userIdentityHeaders(caller!.user);
      prepared = identity.prepared;
      if (!prepared) pushAll(headers, identity.list);
    }
    if (catalogHeader !== undefined) headers.push('x-service-catalog', catalogHeader);
    const path = joinPath(upstream, route!.encodedPath) + (route!.target.query ? `?${route!.target.query}` : '');
    return { origin: upstream.origin, path, headers, checkedHeaders, preparedHeaders: prepared, responseHeaders: ['x-openstack-request-id', requestId] };
  }

  /** A validated user token's identity headers, built once: the validation cache hands back the same context. */
  private userIdentityHeaders(user: TokenContext): IdentityHeaders {
    let headers = this.identityHeaderCache.get(user);
    if (!headers) {
      const list = identityHeaderList(user, undefined);
      headers = { list, prepared: PreparedHeaders.of(list) };
      this.identityHeaderCache.set(user, headers);
    }
    return headers;
  }
}

function pushAll(headers: (string | string[])[], more: readonly string[]): void {
  for (let index = 0; index < more.length; index++) headers.push(more[index]!);
}
