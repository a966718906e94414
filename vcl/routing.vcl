# Avatars to haproxy's avatars port, everything else to its images port.
sub vcl_recv {
  if (req.url ~ "^/u/") {
    set req.backend_hint = avatars;
  } else {
    set req.backend_hint = images;
  }
}
