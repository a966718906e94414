// One decode per picture, not per variant (#48): the frontends ask for many sizes and formats of one image
// within seconds (condenser's 768 and 1536 wide and its feed boxes, ecency's srcset of five widths, each in
// every Accept class, the warmer's first), and the decode was most of each variant's cost. A still image's
// pixels are kept here for a short while, decoded once, turned upright and shrunk by the largest power of two
// that leaves them KEPT_PIXELS_WIDTH wide (1536: condenser's 2x, the widest a frontend asks), raw; a variant that fits within them is resized from them and
// skips the decode (pipeline/decode.js `fromKept`), in this process or in a worker (which gets a copy, and
// makes them where the first variant of a source is a worker's: an AVIF, a HEIC, a warmer's). Bounded by
// bytes (KEPT_PIXELS_BYTES) and by time (KEPT_PIXELS_TTL_S), least recently used first out; keyed by the
// source (a takedown drops them); made once however many variants ask at once. haproxy sends every /p/ of
// one source to one origin, so one origin keeps them; nothing is shared between origins.
import { LRUCache } from 'lru-cache';
import {
  countAgain,
  jpegShrinkOnLoad,
  keepPlan,
  keptBytes,
  keptCovers,
  shrinkOf,
  transformToPixels,
} from './pipeline/index.js';

/**
 * @typedef {import('./pipeline/work.js').KeptPixels} KeptPixels
 * @typedef {import('./pipeline/index.js').Plan} Plan
 * @typedef {import('./pipeline/index.js').SourceInfo} SourceInfo
 */

/**
 * @param {{ maxBytes: number, ttlS: number, width: number, warmKeeps: boolean,
 *   options: import('./pipeline/work.js').TransformOptions, metrics: import('./metrics.js').OriginMetrics }} settings
 *   warmKeeps: a warmer's variants are looked up (their warm worker keeps the pixels itself) even with maxBytes 0;
 *   options: how the pixels are decoded (the limits, the system's codecs)
 */
export function createKeptPixels({ maxBytes, ttlS, width, warmKeeps, options, metrics }) {
  /** @type {LRUCache<string, KeptPixels>} */
  const kept = new LRUCache({
    maxSize: Math.max(1, maxBytes),
    sizeCalculation: (entry) => Math.max(1, keptBytes(entry)),
    ttl: ttlS * 1000,
    dispose: () => queueMicrotask(report),
  });
  /** @type {Map<string, Promise<KeptPixels>>} */
  const making = new Map();
  // sources asked for a variant lately (ten times as long as pixels are kept): a source's pixels are kept
  // only once it has been asked for more than one variant
  /** @type {LRUCache<string, true>} */
  const seen = new LRUCache({ max: 100_000, ttl: ttlS * 10_000 });
  const report = () => metrics.keptPixelsBytes.set({ holder: 'origin' }, kept.calculatedSize);
  const count = (/** @type {string} */ result) => metrics.keptPixels.inc({ result });
  report();

  /**
   * What a variant of plan `p` of the source `key` can start from: its kept pixels when they cover it (a hit),
   * or else the plan that makes them (`keep`) when making them now costs nothing more than the variant's own
   * decode; neither for an animation, a variant larger than what is kept, or with KEPT_PIXELS_BYTES 0.
   * `crossing`: the variant is made in a worker, where held pixels are a copy across processes: given only
   * where the variant would decode that much itself.
   * `warm`: a warmer's variant, whose worker keeps pixels of its own (with warmKeeps, whatever maxBytes).
   * `own`: its worker keeps the source's pixels itself (a warm one, and pixels of kept-pixels' size would cover
   * the variant) and may make it from them: the result is counted once it answers (`counted`), not here.
   * @param {string} key @param {SourceInfo} info @param {Plan} p
   * @param {{ crossing?: boolean, warm?: boolean }} [options]
   * @returns {{ pixels: KeptPixels | null, keep: Plan | null, own: boolean }}
   */
  function lookup(key, info, p, { crossing = false, warm = false } = {}) {
    const keep = maxBytes > 0 || (warm && warmKeeps) ? keepPlan(info, width) : null;
    if (!keep || p.animated) return { pixels: null, keep: null, own: false };
    const pixels = kept.get(key);
    const covered = keptCovers(pixels ?? { width: keep.width ?? 0, height: keptHeight(info, keep) }, info, p);
    if (!covered) {
      count('short');
      return { pixels: null, keep: null, own: false };
    }
    const whole = decodesAsMuch(info, keep, p);
    if (pixels && (whole || !crossing)) {
      count('hit');
      return { pixels, keep: null, own: false };
    }
    const own = crossing && warm;
    // made only where it costs nothing more: by a variant that decodes the picture that large anyway (a wide
    // one; any of a PNG), of a source asked for more than one variant lately, or joining their decode in
    // flight. A small variant of a JPEG decodes an eighth of it, cheaper alone; and on bench/day's mix most
    // sources are asked in two or three sizes, where keeping every source's pixels cost more than it saved.
    const again = seen.has(key);
    seen.set(key, true);
    if (!pixels && (making.has(key) || (whole && again))) return { pixels: null, keep, own };
    if (!own) count('alone');
    return { pixels: null, keep: null, own };
  }

  /**
   * The source's pixels decoded by plan `keep` in this process, once however many variants ask, and kept.
   * @param {string} key @param {string} file @param {Plan} keep @returns {Promise<KeptPixels>}
   */
  function make(key, file, keep) {
    let flight = making.get(key);
    if (flight) {
      count('joined');
      return flight;
    }
    count('made');
    flight = transformToPixels(file, keep, options)
      .then((pixels) => {
        put(key, pixels);
        return pixels;
      })
      .finally(() => making.delete(key));
    making.set(key, flight);
    return flight;
  }

  /** Keeps pixels decoded elsewhere (by a worker). @param {string} key @param {KeptPixels} pixels */
  function put(key, pixels) {
    if (pixels.data.length <= maxBytes) kept.set(key, pixels);
    report();
  }

  return {
    lookup,
    /**
     * What a worker that keeps pixels itself did for a variant (`own` of lookup): made it from them ('hit'),
     * decoded and kept them ('made'), or neither (decoded alone). @param {'hit' | 'made' | undefined} use
     */
    counted(use) {
      count(use ?? 'alone');
    },
    make,
    /**
     * A variant made here from the source's kept pixels may have left its resized pixels beside them
     * (pipeline/shared-resize.js): counted in the bytes held. @param {string} key @param {KeptPixels} pixels
     */
    made(key, pixels) {
      countAgain(kept, key, pixels, maxBytes);
      report();
    },
    /** Keeps a source's pixels that a worker decoded. @param {string} key @param {KeptPixels} pixels */
    putMade(key, pixels) {
      count('made');
      put(key, pixels);
    },
    /** Drops a source's pixels (a takedown, a re-scrubbed upload). @param {string} key */
    drop(key) {
      kept.delete(key);
      report();
    },
  };
}

/**
 * Whether a variant's own decode takes at least the pixels kept ones do: a JPEG at its DCT scale, a WebP or a
 * HEIC at its shrink on load, no smaller than the kept pixels' power of two; a PNG, a TIFF or an AVIF is
 * decoded whole whatever the variant. @param {SourceInfo} info @param {Plan} keep @param {Plan} p
 */
function decodesAsMuch(info, keep, p) {
  if (info.format !== 'jpeg' && info.format !== 'webp' && !info.isHeic) return true;
  const keptFactor = info.width / (keep.width ?? info.width);
  const shrink = shrinkOf(info.width, info.height, p);
  const own = info.format === 'jpeg' ? jpegShrinkOnLoad(shrink) : 2 ** Math.floor(Math.log2(shrink));
  return own <= keptFactor + 0.01;
}

/** The height kept pixels will have by plan `keep` (the source's shape). @param {SourceInfo} info @param {Plan} keep */
const keptHeight = (info, keep) => Math.max(1, Math.round(((keep.width ?? info.width) * info.height) / info.width));
