# Requests are made alike before lookup, so equal answers share one object.
include "sizes.vcl";

sub vcl_recv {
  # set here only, when a parameter is refused (vcl_synth names it): never a client's
  unset req.http.X-Invalid-Parameter;
  # set here only, from a /p/ URL's preview token (below): never a client's own header
  unset req.http.X-Preview-Token;
  # uploads and anything that is not a read go straight through, never cached
  if (req.method != "GET" && req.method != "HEAD") {
    return (pass);
  }
  # the URL as the client (or the CDN) asked for it: the origin remembers it, so a takedown purges the CDN's
  # copy under the very spelling it keeps (a client's own value never gets through)
  set req.http.X-Public-Path = req.url;
  # images are public: credentials and cookies must not split (or bypass) the cache
  unset req.http.Cookie;
  unset req.http.Authorization;
  # a Range that is not one range of bytes (another unit, a list, junk) is ignored, as RFC 9110 asks: the
  # whole image, where varnish answers a 416 with no body (a satisfiable one it answers from the object)
  if (req.http.Range && req.http.Range !~ "^bytes=(\d+-\d*|-\d+)$") {
    unset req.http.Range;
  }
  # so is one whose last byte comes before its first (invalid, not unsatisfiable: RFC 9110 14.1.1)
  if (req.http.Range ~ "^bytes=\d+-\d+$" &&
      std.integer(regsub(req.http.Range, "^bytes=(\d+)-\d+$", "\1"), 0) >
      std.integer(regsub(req.http.Range, "^bytes=\d+-(\d+)$", "\1"), 0)) {
    unset req.http.Range;
  }
  # the origin only distinguishes avif, webp, or neither: three Accept values, three variants at most. A type
  # counts when it is listed with a q above 0 ("image/avif;q=0" refuses AVIF; origin/src/routes/proxy.js
  # acceptClass reads it the same way)
  # an original HEIC is answered as it is only to a client that shows HEIC (Safari): a fourth class, for
  # originals alone
  if (req.url !~ "^/(p|u)/" && req.http.Accept ~ {"(?i)(^|,)\s*image/hei[cf]\s*(,|$|;(?![^,]*\bq\s*=\s*0(\.0{0,3})?\s*(;|,|$)))"}) {
    set req.http.Accept = "image/heic";
  } elsif (req.http.Accept ~ {"(?i)(^|,)\s*image/avif\s*(,|$|;(?![^,]*\bq\s*=\s*0(\.0{0,3})?\s*(;|,|$)))"}) {
    set req.http.Accept = "image/avif";
  } elsif (req.http.Accept ~ {"(?i)(^|,)\s*image/webp\s*(,|$|;(?![^,]*\bq\s*=\s*0(\.0{0,3})?\s*(;|,|$)))"}) {
    set req.http.Accept = "image/webp";
  } else {
    unset req.http.Accept;
  }
  # the editor's preview token (POST /proxy-auth) changes every half hour and changes no image: one object
  # for every holder. On /p/ it is ours; in a legacy URL's query only a 48-hex token is (another belongs
  # to the source URL, e.g. a Firebase download token)
  if (req.url ~ "^/p/") {
    # one spelling per variant, or none: a path is /p/<base58> with at most ecency's file extension (the
    # origin reads neither), anything else there is refused; a parameter given twice counts once (the first,
    # as the origin reads it), a value no variant has is refused, so junk spellings make no objects at all
    if (req.url !~ {"^/p/[1-9A-HJ-NP-Za-km-z]+(\.(?i:webp|png|jpe?g|gif|avif))?(\?|$)"}) {
      return (synth(400, "invalid_path"));
    }
    set req.url = regsub(req.url, {"^(/p/[1-9A-HJ-NP-Za-km-z]+)[^?]*"}, "\1");
    # the editor's preview token lets an image no post references yet through the origin's proxy whitelist
    # (PROXY_WHITELIST): it goes to the origin beside the URL, never into the key; the origin answers such an
    # image `private, no-store` (policy.vcl: never kept, never served to another client)
    if (req.url ~ {"[?&]token=[0-9a-f]{48}(&|$)"}) {
      set req.http.X-Preview-Token = regsub(req.url, {"^.*?[?&]token=([0-9a-f]{48})(&.*)?$"}, "\1");
    }
    # ecency's placeholder (blur=1 or blur=true, the first blur counting, as the origin reads it): a JPEG for
    # everyone, whatever size or format was asked beside it: one object per source (origin/src/options.js)
    if (req.url ~ {"[?&]blur="} && regsub(req.url, {"^.*?[?&]blur=([^&]*).*$"}, "\1") ~ "^(1|true)$") {
      set req.url = regsub(req.url, {"\?.*$"}, "?blur=1");
      unset req.http.Accept;
    } else {
      set req.url = regsub(req.url, {"([?&](width|height|mode|format)=[^&]*)(.*?)&\2=[^&]*"}, "\1\3");
      set req.url = regsub(req.url, {"([?&](width|height|mode|format)=[^&]*)(.*?)&\2=[^&]*"}, "\1\3");
      if (req.url ~ {"[?&](width|height|mode|format)=[^&]*&(.*&)?\1="}) {
        return (synth(400, "repeated_parameter"));
      }
      if (req.url ~ {"[?&]mode=(?!(cover|fit)(&|$))"}) {
        set req.http.X-Invalid-Parameter = "mode";
        return (synth(400, "invalid_parameter"));
      }
      if (req.url ~ {"[?&]format=(?!(match|jpeg|jpg|png|webp|avif|auto)(&|$))"}) {
        set req.http.X-Invalid-Parameter = "format";
        return (synth(400, "invalid_parameter"));
      }
      # only what the origin reads keys the cache, in one spelling each (its result cache keys on the parsed
      # values alike): every other parameter (the preview token, a cache buster) is dropped; sizes are read as
      # the origin reads them (parseInt: spaces and a plus sign first, leading digits, no leading zeros; 0 and
      # a value without digits are no size; a negative size is refused); the defaults (format=match,
      # mode=cover) and format=jpg's alias are written as the origin understands them
      set req.url = regsuball(req.url, {"([?&])(?!(?:width|height|mode|format)=)[^&]*"}, "\1");
      set req.url = regsuball(req.url, {"([?&](?:width|height)=)(?:\+|%20|%09|%0[AaDd]|%2[Bb])+"}, "\1");
      if (req.url ~ {"[?&](width|height)=(-|%2[Dd])[0-9]"}) {
        set req.http.X-Invalid-Parameter = regsub(req.url, {"^.*?[?&](width|height)=(-|%2[Dd])[0-9].*$"}, "\1");
        return (synth(400, "invalid_parameter"));
      }
      set req.url = regsuball(req.url, {"([?&](?:width|height)=)0*([0-9]+)[^&]*"}, "\1\2");
      set req.url = regsuball(req.url, {"([?&])(?:width|height)=(?![0-9])[^&]*"}, "\1");
      set req.url = regsuball(req.url, {"([?&])(?:width=0|height=0|format=match|mode=cover)(?=&|$)"}, "\1");
      set req.url = regsuball(req.url, {"([?&]format=)jpg(?=&|$)"}, "\1jpeg");
      set req.url = regsuball(req.url, {"([?&])&+"}, "\1");
      # sizes past MAX_DIMENSION and, with ALLOWED_SIZES, between listed sizes, as the origin makes them
      call canonical_sizes;
    }
  } elsif (req.url ~ "^/[0-9]+x[0-9]+/") {
    # condenser's editor appends its preview token to a legacy URL: carried into the redirect by the origin
    # (policy.vcl passes such a request: the redirect is the token holder's alone)
    if (req.url ~ {"[?&]token=[0-9a-f]{48}(&|$)"}) {
      set req.http.X-Preview-Token = regsub(req.url, {"^.*?[?&]token=([0-9a-f]{48})(&.*)?$"}, "\1");
    }
    set req.url = regsuball(req.url, "([?&])token=[0-9a-f]{48}(&|$)", "\1");
  }
  set req.url = regsub(req.url, "[?&]+$", "");
  # ?width=1&height=2 and ?height=2&width=1 are one object
  set req.url = std.querysort(req.url);
}
