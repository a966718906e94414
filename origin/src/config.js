import os from 'node:os';
import { commonSettings, hiveSettings, sharedSettings } from '@stack/lib';

/** @type {import('@stack/lib/src/config.js').Setting[]} */
export const settings = [
  ...commonSettings('origin', 8800, 9800),
  ...sharedSettings,
  ...hiveSettings,
  { name: 'DATA_DIR', type: 'string', default: './data/origin', doc: 'uploads and cached originals (a file each) and variants (segment files) live here; put it on a journaled filesystem: ext4 without a journal makes each new file pass over the inodes freed in the last minutes, which costs the origin CPU once the originals cache evicts' },
  { name: 'UPLOAD_MAX_BYTES', type: 'bytes', default: '30mb', doc: 'largest accepted upload (nginx client_max_body_size follows it)' },
  { name: 'UPLOAD_TOKENS', type: 'list', default: '', doc: 'Bearer tokens accepted by POST /upload (comma separated); empty disables it', secret: true },
  { name: 'UPLOAD_QUOTA_PER_WEEK', type: 'int', default: '300', doc: 'uploads per Hive account per week', min: 0 },
  { name: 'HIVESIGNER_APP', type: 'string', default: '', doc: 'this site\'s Hivesigner app account: POST /hs/<access token> uploads are taken from users who authorised it; empty: off (404)' },
  { name: 'HIVESIGNER_API_URL', type: 'string', default: 'https://hivesigner.com', doc: 'Hivesigner, asked who an access token belongs to (/api/me)' },
  { name: 'PREVIEW_TOKEN_TTL_S', type: 'int', default: '1800', doc: 'lifetime of an editor preview token (POST /proxy-auth, as images.hive.blog)', min: 1 },
  { name: 'PREVIEW_CLOCK_SKEW_S', type: 'int', default: '300', doc: 'how far a /proxy-auth timestamp may be from this server\'s clock', min: 1 },
  { name: 'FETCH_MAX_BYTES', type: 'bytes', default: '15mb', doc: 'largest remote original fetched' },
  { name: 'FETCH_CONNECT_TIMEOUT_MS', type: 'int', default: '5000', doc: 'connect timeout of a remote fetch', min: 1 },
  { name: 'FETCH_RESPONSE_TIMEOUT_MS', type: 'int', default: '5000', doc: 'time to the response headers, and the longest pause between body chunks', min: 1 },
  { name: 'FETCH_TOTAL_TIMEOUT_MS', type: 'int', default: '30000', doc: 'a remote fetch, all included', min: 1 },
  { name: 'FETCH_MAX_REDIRECTS', type: 'int', default: '5', doc: 'redirects followed (each target re-checked)', min: 0 },
  { name: 'FETCH_ALLOW_PRIVATE_HOSTS', type: 'list', default: '', doc: 'host names or addresses allowed although private or loopback (tests, intranets)' },
  { name: 'FETCH_USER_AGENT', type: 'string', default: 'image-cdn-stack/0.1 (+origin fetch)', doc: 'User-Agent of remote fetches' },
  { name: 'UNWRAP_HOSTS', type: 'list', default: 'images.hive.blog,steemitimages.com,images.ecency.com', doc: 'image proxies whose /p/ and WxH URLs are unwrapped to the original they wrap' },
  { name: 'MAX_INPUT_PIXELS', type: 'int', default: '50000000', doc: 'largest source image (pixels, all frames), read from the header before decoding', min: 1 },
  { name: 'MAX_FRAMES', type: 'int', default: '300', doc: 'most frames in an animated source', min: 1 },
  { name: 'MAX_DIMENSION', type: 'int', default: '8000', doc: 'requested width and height are capped at this', min: 1 },
  { name: 'DEFAULT_WIDTH', type: 'int', default: '1280', doc: 'box width when a request gives no size', min: 1 },
  { name: 'DEFAULT_HEIGHT', type: 'int', default: '8000', doc: 'box height when a request gives no size', min: 1 },
  { name: 'TRANSFORM_CONCURRENCY', type: 'int', default: '0', doc: 'transforms at once; 0: 2 × cores', min: 0 },
  { name: 'TRANSFORM_QUEUE_MAX', type: 'int', default: '64', doc: 'transforms waiting; past it an immediate 503 with Retry-After', min: 0 },
  { name: 'TRANSFORM_DEGRADE_DEPTH', type: 'int', default: '8', doc: 'queue depth from which avif/auto are encoded as cheaper WebP with a short Cache-Control', min: 0 },
  { name: 'TRANSFORM_TIMEOUT_S', type: 'int', default: '30', doc: 'longest transform', min: 1 },
  { name: 'TRANSFORM_THREADS', type: 'int', default: '0', doc: 'libvips threads per transform; 0: cores ÷ transforms running (a lone transform gets every core, a full house one each)', min: 0 },
  { name: 'TRANSFORM_NICE', type: 'int', default: '10', doc: 'niceness of the threads that transform (all but the event loop), so the request path keeps the CPU under a flood of transforms; 0 leaves them alone', min: 0, max: 19 },
  { name: 'SMALL_BOX', type: 'int', default: '256', doc: 'requests whose box fits in this many pixels (avatars, thumbnails) go ahead in the queue', min: 0 },
  { name: 'ORIGINALS_CACHE_BYTES', type: 'bytes', default: '2gb', doc: 'disk kept for fetched remote originals (LRU)' },
  { name: 'VARIANTS_CACHE_BYTES', type: 'bytes', default: '2gb', doc: 'disk kept for encoded variants (LRU; segment files of a 32nd of it, at most 64 MB)' },
  { name: 'FAILURE_TTL_PERMANENT_S', type: 'int', default: '86400', doc: 'how long "not found / not an image" is remembered', min: 0 },
  { name: 'FAILURE_TTL_TRANSIENT_S', type: 'int', default: '120', doc: 'how long timeouts, 5xx and connection errors are remembered', min: 0 },
  { name: 'JPEG_QUALITY', type: 'int', default: '80', doc: 'JPEG quality (mozjpeg\'s libjpeg, progressive, optimised Huffman tables, quantisation table 3)', min: 1 },
  { name: 'JPEG_TRELLIS', type: 'bool', default: 'false', doc: 'mozjpeg trellis quantisation and scan optimisation: 11% smaller files at the same quality setting (about 4% at equal SSIM) for 4× the encode time' },
  { name: 'WEBP_QUALITY', type: 'int', default: '80', doc: 'WebP quality', min: 1 },
  { name: 'WEBP_EFFORT', type: 'int', default: '4', doc: 'WebP encoder effort (0-6; 1 when degraded under a deep queue): bench/effort', min: 0, max: 6 },
  { name: 'AVIF_QUALITY', type: 'int', default: '50', doc: 'AVIF quality', min: 1 },
  { name: 'AVIF_EFFORT', type: 'int', default: '3', doc: 'AVIF encoder effort (0-9): 3 makes the same bytes as 4 for a quarter of the CPU (bench/effort)', min: 0, max: 9 },
  { name: 'AUTO_AVIF_FIRST_ANSWER', type: 'bool', default: 'true', doc: 'format=auto for an AVIF browser: while its AVIF is not made yet, answer at once in WebP (CACHE_CONTROL_FIRST_ANSWER) and make the AVIF in the background on idle capacity; false: the first visitor waits for the AVIF encode' },
  { name: 'BACKGROUND_ENCODES_MAX', type: 'int', default: '256', doc: 'AVIF encodes waiting for idle capacity; past it (or when the transform queue is full) they are dropped and asked again by the next request', min: 0 },
  { name: 'CDN_VARY_ACCEPT', type: 'bool', default: 'false', doc: 'whether the CDN in front keeps one copy per Accept (honours Vary: Accept, e.g. Cloudflare with "Vary for Images"); false: format=auto answers carry CDN-Cache-Control and Cloudflare-CDN-Cache-Control: no-store, so a CDN never serves an AVIF to a browser that cannot decode it (varnish still caches one per Accept class)' },
  { name: 'CACHE_CONTROL_IMMUTABLE', type: 'string', default: 'public, max-age=31536000, immutable', doc: 'Cache-Control of originals and variants' },
  { name: 'CACHE_CONTROL_NEGATIVE', type: 'string', default: 'public, max-age=60', doc: 'Cache-Control of 4xx answers (negative caching)' },
  { name: 'CACHE_CONTROL_FIRST_ANSWER', type: 'string', default: 'public, max-age=30, s-maxage=30', doc: 'Cache-Control of a format=auto first answer in WebP while its AVIF is made: short, so varnish asks again once the AVIF can be there' },
  { name: 'CACHE_CONTROL_DEGRADED', type: 'string', default: 'public, max-age=60, s-maxage=300', doc: 'Cache-Control of a variant degraded under load' },
];

/** The transform slots: the setting, or 2 × cores when it is 0. @param {Record<string, any>} config */
export function transformConcurrency(config) {
  return config.TRANSFORM_CONCURRENCY || os.availableParallelism() * 2;
}
