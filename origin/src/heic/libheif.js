// HEIC (HEVC-coded HEIF: the iPhone's photographs) through the system's libheif and libde265 (Debian's
// libheif1 and libde265-0), called through koffi as codecs.js calls libjpeg-turbo: the libvips that sharp
// ships decodes AV1 (AVIF) only. Variants go through planes.js first (FFmpeg, planes shrunk before RGB);
// libheif reads every header (the probe), verifies uploads, and decodes what planes.js does not take. It
// gives the primary image (a multi-image file's other images are not read), turned as the file says (irot,
// imir), as RGB or RGBA; its colour profile goes with the pixels into an uncompressed TIFF that sharp reads
// like any other file, so the profile is applied and every limit of the pipeline holds. Decoding runs on
// libuv's thread pool, and in a transform worker that is killed at the transform timeout (../workers/pool.js).
import { HttpError } from '@stack/lib/src/errors.js';
import { callAsync, loadOnce } from '../codecs.js';

const COLORSPACE_RGB = 1;
const CHROMA_RGB = 10;
const CHROMA_RGBA = 11;
const CHANNEL_INTERLEAVED = 10;
const PROFILE_ICC = [0x70726f66, 0x72494343]; // 'prof', 'rICC'

/**
 * @typedef {{ width: number, height: number, hasAlpha: boolean, icc: Buffer | null }} HeicInfo
 * @typedef {{ info: (file: Buffer) => HeicInfo, decode: (file: Buffer, maxPixels: number) => Promise<{ tiff: Buffer, width: number, height: number }> }} HeicDecoder
 */

/** The system's libheif, or null where it (or koffi) is not there. Loaded once. */
export const heicDecoder = loadOnce((koffi) => libheif(koffi, koffi.load('libheif.so.1')));

/** A HEIF whose images are not decodable: the client's file, a 400. @param {string} message */
const corrupt = (message) =>
  new HttpError(400, 'invalid_image', { reason: 'corrupt or unsupported HEIC', detail: message.slice(0, 120) });

/** @param {any} koffi @param {any} lib @returns {HeicDecoder} */
function libheif(koffi, lib) {
  koffi.struct('heif_error', { code: 'int', subcode: 'int', message: 'const char *' });
  const alloc = lib.func('void *heif_context_alloc()');
  const free = lib.func('void heif_context_free(void *ctx)');
  const read = lib.func(
    'heif_error heif_context_read_from_memory_without_copy(void *ctx, const uint8_t *mem, size_t size, void *options)',
  );
  const primary = lib.func('heif_error heif_context_get_primary_image_handle(void *ctx, _Out_ void **handle)');
  const width = lib.func('int heif_image_handle_get_width(void *handle)');
  const height = lib.func('int heif_image_handle_get_height(void *handle)');
  const alpha = lib.func('int heif_image_handle_has_alpha_channel(void *handle)');
  const profileType = lib.func('uint32_t heif_image_handle_get_color_profile_type(void *handle)');
  const profileSize = lib.func('size_t heif_image_handle_get_raw_color_profile_size(void *handle)');
  const profile = lib.func('heif_error heif_image_handle_get_raw_color_profile(void *handle, _Out_ uint8_t *out)');
  const releaseHandle = lib.func('void heif_image_handle_release(void *handle)');
  const decode = lib.func(
    'heif_error heif_decode_image(void *handle, _Out_ void **image, int colorspace, int chroma, void *options)',
  );
  const plane = lib.func('void *heif_image_get_plane_readonly(void *image, int channel, _Out_ int *stride)');
  const planeWidth = lib.func('int heif_image_get_width(void *image, int channel)');
  const planeHeight = lib.func('int heif_image_get_height(void *image, int channel)');
  const releaseImage = lib.func('void heif_image_release(void *image)');
  const optionsAlloc = lib.func('void *heif_decoding_options_alloc()');
  const optionsFree = lib.func('void heif_decoding_options_free(void *options)');
  // Strict decoding (heif_decoding_options version 3, offset 41: after version, ignore_transformations, three
  // callbacks, their user data and convert_hdr_to_8bit): a picture that decodes with warnings (a grid tile
  // that failed) is an error. Without it libheif leaves that tile's area as the heap had it, and the same
  // file decoded twice gave two images (#51): uninitialised memory, served.
  const strict = optionsAlloc();
  const strictView = new Uint8Array(koffi.view(strict, 48));
  if (strictView[0] < 3) throw new Error('libheif: decoding options older than version 3');
  strictView[41] = 1;
  void optionsFree; // kept for the process's life: one options block, read only by libheif
  const filled = filledHeap(koffi);

  /** @param {{ code: number, message: string }} err */
  const check = (err) => {
    if (err.code !== 0) throw corrupt(String(err.message || `libheif error ${err.code}`));
  };

  /**
   * `use(handle)` on the primary image of `file` (a context kept open for it). @template T
   * @param {Buffer} file @param {(handle: any) => Promise<T> | T} use @returns {Promise<T>}
   */
  async function withPrimary(file, use) {
    const ctx = alloc();
    if (!ctx) throw new Error('libheif: no context');
    try {
      check(read(ctx, file, file.length, null));
      const out = [null];
      check(primary(ctx, out));
      try {
        return await use(out[0]);
      } finally {
        releaseHandle(out[0]);
      }
    } finally {
      free(ctx);
    }
  }

  /** @param {any} handle @returns {HeicInfo} */
  function infoOf(handle) {
    let icc = null;
    if (PROFILE_ICC.includes(profileType(handle))) {
      const size = Number(profileSize(handle));
      if (size > 0 && size < 4 * 1024 * 1024) {
        icc = Buffer.alloc(size);
        check(profile(handle, icc));
      }
    }
    return { width: width(handle), height: height(handle), hasAlpha: Boolean(alpha(handle)), icc };
  }

  return {
    info(file) {
      // synchronous: the container only
      let result = /** @type {HeicInfo | null} */ (null);
      const ctx = alloc();
      try {
        check(read(ctx, file, file.length, null));
        const out = [null];
        check(primary(ctx, out));
        try {
          result = infoOf(out[0]);
        } finally {
          releaseHandle(out[0]);
        }
      } finally {
        free(ctx);
      }
      return result;
    },
    decode(file, maxPixels) {
      return withPrimary(file, async (handle) => {
        const info = infoOf(handle);
        if (info.width * info.height > maxPixels)
          throw new HttpError(400, 'image_too_large', {
            width: info.width,
            height: info.height,
            limit_pixels: maxPixels,
          });
        const channels = info.hasAlpha ? 4 : 3;
        const out = [null];
        const chroma = info.hasAlpha ? CHROMA_RGBA : CHROMA_RGB;
        check(await filled(() => callAsync(decode, handle, out, COLORSPACE_RGB, chroma, strict)));
        const image = out[0];
        try {
          const stride = [0];
          const pointer = plane(image, CHANNEL_INTERLEAVED, stride);
          const w = planeWidth(image, CHANNEL_INTERLEAVED);
          const h = planeHeight(image, CHANNEL_INTERLEAVED);
          if (!pointer || w <= 0 || h <= 0 || stride[0] < w * channels) throw corrupt('no pixels');
          const rows = new Uint8Array(koffi.view(pointer, stride[0] * h));
          return { tiff: rgbTiff(rows, w, h, channels, stride[0], info.icc), width: w, height: h };
        } finally {
          releaseImage(image);
        }
      });
    },
  };
}

/** glibc's mallopt(M_PERTURB): what malloc hands out is filled with this byte's complement (0: left as it is). */
const M_PERTURB = -6;
const PATTERN = 165;

/**
 * `run()` with the heap's new memory filled with a pattern while it runs. Even with strict decoding, libheif
 * 1.15 pastes a grid's tiles where the first tile's declared size puts them: a tile that decodes smaller
 * leaves part of the picture as malloc had it, other requests' pixels, different each time (#51). Filled, the
 * same bytes always make the same answer. Only while a libheif decode is running (a count, kept on this
 * thread): the pattern for every allocation of the process cost 150 MB of RSS under bench/overload's flood.
 * Where glibc's mallopt is not there, `run()` as it is. @param {any} koffi
 */
function filledHeap(koffi) {
  let mallopt = /** @type {((param: number, value: number) => number) | null} */ (null);
  try {
    mallopt = koffi.load('libc.so.6').func('int mallopt(int param, int value)');
  } catch {
    // not glibc
  }
  let running = 0;
  /** @template T @param {() => Promise<T>} run @returns {Promise<T>} */
  return async (run) => {
    if (running++ === 0) mallopt?.(M_PERTURB, PATTERN);
    try {
      return await run();
    } finally {
      if (--running === 0) mallopt?.(M_PERTURB, 0);
    }
  };
}

/**
 * An uncompressed TIFF of interleaved 8-bit RGB(A) rows (`stride` bytes apart) and their ICC profile: what
 * sharp reads with the profile applied, as it reads any file. @param {Uint8Array} rows @param {number} width
 * @param {number} height @param {3 | 4} channels @param {number} stride @param {Buffer | null} icc
 */
export function rgbTiff(rows, width, height, channels, stride, icc) {
  const rowBytes = width * channels;
  /** @type {Array<[number, number, number, number | number[]]>} tag, type (3 SHORT, 4 LONG, 7 UNDEFINED), count, value */
  const entries = [
    [256, 4, 1, width],
    [257, 4, 1, height],
    [258, 3, channels, Array(channels).fill(8)],
    [259, 3, 1, 1],
    [262, 3, 1, 2],
    [273, 4, 1, 0],
    [277, 3, 1, channels],
    [278, 4, 1, height],
    [279, 4, 1, rowBytes * height],
    [284, 3, 1, 1],
    ...(channels === 4 ? [/** @type {[number, number, number, number]} */ ([338, 3, 1, 2])] : []),
    ...(icc ? [/** @type {[number, number, number, number]} */ ([34675, 7, icc.length, 0])] : []),
  ];
  const ifdSize = 2 + entries.length * 12 + 4;
  const bitsAt = 8 + ifdSize;
  const iccAt = bitsAt + (channels > 2 ? channels * 2 : 0);
  const pixelsAt = iccAt + (icc ? icc.length + (icc.length & 1) : 0);
  const out = Buffer.alloc(pixelsAt + rowBytes * height);
  out.write('II', 0, 'latin1');
  out.writeUInt16LE(42, 2);
  out.writeUInt32LE(8, 4);
  out.writeUInt16LE(entries.length, 8);
  entries.forEach(([tag, type, count, value], i) => {
    const at = 10 + i * 12;
    out.writeUInt16LE(tag, at);
    out.writeUInt16LE(type, at + 2);
    out.writeUInt32LE(count, at + 4);
    if (tag === 258) out.writeUInt32LE(bitsAt, at + 8);
    else if (tag === 273) out.writeUInt32LE(pixelsAt, at + 8);
    else if (tag === 34675) out.writeUInt32LE(iccAt, at + 8);
    else if (type === 3) out.writeUInt16LE(/** @type {number} */ (value), at + 8);
    else out.writeUInt32LE(/** @type {number} */ (value), at + 8);
  });
  for (let i = 0; i < channels; i += 1) out.writeUInt16LE(8, bitsAt + i * 2);
  if (icc) icc.copy(out, iccAt);
  for (let y = 0; y < height; y += 1)
    out.set(rows.subarray(y * stride, y * stride + rowBytes), pixelsAt + y * rowBytes);
  return out;
}
