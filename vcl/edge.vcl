# The edge logic, by concern. Each built-in sub may be defined in several files: Varnish runs the
# definitions in include order, so purge comes before normalisation, normalisation before routing.
include "purge.vcl";
# an upload's body kept for a second try (rendered from VARNISH_UPLOAD_RETRY_BYTES)
include "uploads.vcl";
include "normalise.vcl";
include "routing.vcl";
include "policy.vcl";
include "deliver.vcl";
# per-client miss rates (rendered from the settings)
include "limits.vcl";
