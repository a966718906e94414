# PURGE (one URL, all its variants), xkey purges and operator BANs: on the purge socket from the purge
# service's user (default.vcl.template checks the peer and marks the request), or from the purgers ACL (a
# cluster's nodes purged over the network). Requests that came through nginx carry X-From-Edge (nginx sets it
# on every request it forwards): those are public, whatever their address. (X-Forwarded-For cannot tell:
# varnish adds it itself.)
sub vcl_recv {
  if (req.method == "PURGE" || req.method == "BAN") {
    if (req.http.X-From-Edge || (!req.http.X-Purge-Socket && client.ip !~ purgers)) {
      return (synth(403, "purge_forbidden"));
    }
    if (req.method == "BAN") {
      # e.g. X-Ban: obj.http.xkey ~ "avatar:alice" ; only object expressions (lurker-friendly)
      if (req.http.X-Ban !~ "^obj\.") {
        return (synth(400, "ban_needs_obj_expression"));
      }
      if (std.ban(req.http.X-Ban)) {
        return (synth(200, "banned"));
      }
      return (synth(400, "ban_invalid"));
    }
    if (req.http.xkey) {
      if (req.http.xkey-soft) {
        set req.http.x-purged = xkey.softpurge(req.http.xkey);
      } else {
        set req.http.x-purged = xkey.purge(req.http.xkey);
      }
      return (synth(200, "purged"));
    }
    return (purge);
  }
}
