# Caching policy: TTLs come from the services' Cache-Control (s-maxage, then max-age: varnish's
# default), grace 24 h, failures never cached.
sub vcl_recv {
  # healthy backend: stale objects only briefly (a fresh one is fetched in the background);
  # sick backend: anything up to a day old rather than an error
  if (std.healthy(req.backend_hint)) {
    set req.grace = 10s;
  } else {
    set req.grace = 24h;
  }
  # a legacy URL with a preview token: its redirect carries the token (the editor's preview of an image no
  # post references yet), never a cached one without it, and is kept for no one
  if (req.http.X-Preview-Token && req.url !~ "^/p/") {
    return (pass);
  }
  return (hash);
}

sub vcl_hash {
  # one site: the Host a CDN or a purger uses must not split objects
  hash_data(req.url);
  return (lookup);
}

sub vcl_backend_response {
  set beresp.grace = 24h;
  if (beresp.status >= 500) {
    # a failed background refresh keeps the stale object instead of replacing it
    if (bereq.is_bgfetch) {
      return (abandon);
    }
    # never cached, and never ttl = 0 alone (that serialises every request behind one fetch)
    set beresp.uncacheable = true;
    set beresp.ttl = 5s;
    return (deliver);
  }
  # a warmer's request deferred by the origin (no idle capacity): readers asking meanwhile go on to the
  # origin as before, not held as hit-for-miss behind the warmer's refusal for long
  if (beresp.status == 429 && bereq.http.X-Warm) {
    set beresp.uncacheable = true;
    set beresp.ttl = 1s;
    return (deliver);
  }
  if (beresp.http.Cache-Control ~ "(no-store|private)") {
    set beresp.uncacheable = true;
    set beresp.ttl = 60s;
    return (deliver);
  }
}

sub vcl_backend_error {
  if (bereq.is_bgfetch) {
    return (abandon);
  }
  set beresp.http.Content-Type = "application/json";
  set beresp.http.Cache-Control = "no-store";
  set beresp.http.Retry-After = "5";
  set beresp.body = """{"error":{"name":"service_unavailable","info":{"layer":"varnish"}}}""";
  return (deliver);
}
