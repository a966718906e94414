# Requests are made alike before lookup, so equal answers share one object.
sub vcl_recv {
  # uploads and anything that is not a read go straight through, never cached
  if (req.method != "GET" && req.method != "HEAD") {
    return (pass);
  }
  # images are public: credentials and cookies must not split (or bypass) the cache
  unset req.http.Cookie;
  unset req.http.Authorization;
  # the origin only distinguishes avif, webp, or neither: three Accept values, three variants at most
  if (req.http.Accept ~ "image/avif") {
    set req.http.Accept = "image/avif";
  } elsif (req.http.Accept ~ "image/webp") {
    set req.http.Accept = "image/webp";
  } else {
    unset req.http.Accept;
  }
  # ?width=1&height=2 and ?height=2&width=1 are one object
  set req.url = std.querysort(req.url);
}
