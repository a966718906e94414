# What leaves varnish: X-Cache, no internal headers, JSON for varnish's own answers.
sub vcl_deliver {
  if (obj.uncacheable) {
    set resp.http.X-Cache = "PASS";
  } elsif (obj.hits > 0) {
    set resp.http.X-Cache = "HIT";
  } else {
    set resp.http.X-Cache = "MISS";
  }
  # which node of a varnish cluster answered (varnishd -i)
  set resp.http.X-Served-By = server.identity;
  unset resp.http.xkey;
  unset resp.http.Via;
  unset resp.http.X-Varnish;
}

sub vcl_synth {
  set resp.http.Content-Type = "application/json";
  set resp.http.Cache-Control = "no-store";
  if (resp.status == 429) {
    set resp.http.Retry-After = "5";
  }
  if (resp.status == 200) {
    if (!req.http.x-purged) {
      set req.http.x-purged = "0";
    }
    set resp.body = {"{"ok":true,"result":""} + resp.reason + {"","purged":"} + req.http.x-purged + "}";
  } else {
    if (req.http.X-Invalid-Parameter) {
      # which parameter, as the origin names it
      set resp.body = {"{"error":{"name":""} + resp.reason + {"","info":{"name":""} + req.http.X-Invalid-Parameter + {"""} + "}}}";
    } else {
      set resp.body = {"{"error":{"name":""} + resp.reason + {"","info":{"} + "}}}";
    }
  }
  return (deliver);
}
