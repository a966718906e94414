// The system's libjpeg-turbo (its TurboJPEG API) and libwebp, called through koffi, for the steps where
// sharp's own build is slow: decoding a JPEG original, and encoding a JPEG or a WebP variant. sharp's prebuilt
// libvips carries its own mozjpeg and libwebp: on the real photographs (bench/FINDINGS.md) Debian's
// libjpeg-turbo decodes the same JPEG at 1/4 scale, to the same pixels, in about 57 % of the CPU time and
// encodes the same pixels to the same bytes in 39-64 % (bench/codecs; a whole variant a few per cent less:
// the encode is a small part of it), and Debian's libwebp encodes the same pixels to the same bytes in about
// 80 %.
// Everything else (orientation, resizing, every other codec) stays with sharp. Both libraries come from the
// distribution, so they get its security updates. Every call runs on libuv's thread pool (koffi's async
// calls), never on the event loop.
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import sharp from 'sharp';

const require = createRequire(import.meta.url);

// TurboJPEG 2.x constants (turbojpeg.h)
const TJPF_RGB = 0;
const TJCS_RGB = 0;
const TJCS_YCbCr = 1;
const TJSAMP_420 = 2;
const TJFLAG_NOREALLOC = 1024;
const TJFLAG_ACCURATEDCT = 4096;
const TJFLAG_PROGRESSIVE = 16384;
/**
 * A progressive JPEG is decoded once per scan: a hostile file with thousands of tiny scans burns CPU out of
 * all proportion to its size (libjpeg-turbo's own advice is a scan limit). Files past this go to sharp,
 * whose pipeline has the transform timeout. Real progressive files have about ten.
 */
const MAX_SCANS = 100;
/** Decoded larger than this (48 MB of RGB), a JPEG goes to sharp, whose pipeline streams it in strips. */
const MAX_DECODED_PIXELS = 16 * 1024 * 1024;
/** What the buffer pool keeps between transforms at most. */
const POOL_BYTES = 64 * 1024 * 1024;

/**
 * @typedef {{ data: Buffer, info: { width: number, height: number, channels: 3 } }} RawImage
 * @typedef {{ decode: (jpeg: Buffer, scale: 1 | 2 | 4 | 8, pool: BufferPool) => Promise<RawImage | null>,
 *   encode: (raw: { data: Buffer, info: { width: number, height: number, channels: number } }, options: JpegEncodeOptions, pool: BufferPool) => Promise<Buffer | null>,
 *   agrees: boolean | null }} JpegCodec
 *   encode: RGB pixels (3 channels) to the JPEG sharp writes of them (its `jpeg()` without trellis, standard
 *   tables); null where this library's bytes would not be sharp's (`agrees`: false once a first encode found
 *   so, null before it)
 * @typedef {{ quality: number, progressive: boolean }} JpegEncodeOptions
 * @typedef {(raw: { data: Buffer, info: { width: number, height: number, channels: number } }, options: JpegEncodeOptions, pool: BufferPool) => Promise<Buffer>} JpegEncode
 * @typedef {{ encode: (raw: { data: Buffer, info: { width: number, height: number, channels: number } }, quality: number, effort: number) => Promise<Buffer> }} WebpEncoder
 *   effort: libwebp's method, 0-6 (sharp's webp `effort`)
 * @typedef {{ jpeg: JpegCodec | null, webp: WebpEncoder | null, libraries: string[], buffers: BufferPool }} SystemCodecs
 */

/**
 * Loads what the system has. `off`: nothing (sharp does all); `auto`: what is found; `on`: both or an error,
 * for images that must not silently run slower. poolBytes: what the buffer pool keeps at most (a transform
 * worker, one transform at a time, keeps less).
 * @param {'auto' | 'on' | 'off'} mode @param {{ poolBytes?: number }} [options] @returns {SystemCodecs}
 */
export function loadSystemCodecs(mode, { poolBytes = POOL_BYTES } = {}) {
  const buffers = new BufferPool(poolBytes);
  if (mode === 'off') return { jpeg: null, webp: null, libraries: [], buffers };
  // koffi ships prebuilt for the usual platforms; where it has none, `auto` runs on sharp alone
  const koffi = attempt(() => require('koffi'));
  const jpeg = koffi && attempt(() => turboJpeg(koffi.load('libturbojpeg.so.0')));
  const webp = koffi && attempt(() => libwebp(koffi, koffi.load('libwebp.so.7')));
  if (mode === 'on' && (!jpeg || !webp)) {
    throw new Error(
      `SYSTEM_CODECS=on but ${[!jpeg && 'libturbojpeg.so.0 (Debian: libturbojpeg0)', !webp && 'libwebp.so.7 (Debian: libwebp7)'].filter(Boolean).join(' and ')} could not be loaded`,
    );
  }
  const libraries = [jpeg && 'libturbojpeg.so.0', webp && `libwebp.so.7 ${webp.version}`].filter(
    (name) => typeof name === 'string',
  );
  return { jpeg, webp, libraries: /** @type {string[]} */ (libraries), buffers };
}

/** @template T @param {() => T} load @returns {T | null} */
function attempt(load) {
  try {
    return load();
  } catch {
    return null;
  }
}

/**
 * A loader of a system library through koffi, run on the first call only: what it loads, or null where koffi
 * or the library is not there (the caller then does without). @template T
 * @param {(koffi: any) => T} load @returns {() => T | null}
 */
export function loadOnce(load) {
  /** @type {T | null | undefined} */
  let loaded;
  return () => {
    if (loaded === undefined) loaded = attempt(() => load(require('koffi')));
    return loaded;
  };
}

/** A koffi function called on libuv's thread pool. @param {any} fn @param {...any} args @returns {Promise<any>} */
export function callAsync(fn, ...args) {
  return new Promise((resolve, reject) => {
    fn.async(...args, (/** @type {Error | null} */ err, /** @type {any} */ result) =>
      err ? reject(err) : resolve(result),
    );
  });
}

/**
 * Decoding at a DCT scale (1/8, 1/4, 1/2 or 1: libjpeg's IDCT computes only that many pixels per block; the
 * image as stored, before any EXIF rotation), into a buffer of the pool. `null` for what it leaves to sharp:
 * CMYK and greyscale files, too many scans, more than MAX_DECODED_PIXELS decoded, and any file libjpeg-turbo
 * warns about or refuses (sharp then decides, as before, whether that is an error). Encoding: see jpegEncoder.
 * @param {any} lib @returns {JpegCodec}
 */
function turboJpeg(lib) {
  const encoder = jpegEncoder(lib);
  const init = lib.func('void *tjInitDecompress()');
  const destroy = lib.func('int tjDestroy(void *handle)');
  const header = lib.func(
    'int tjDecompressHeader3(void *handle, const uint8_t *jpeg, unsigned long size, _Out_ int *width, _Out_ int *height, _Out_ int *subsamp, _Out_ int *colorspace)',
  );
  const decompress = lib.func(
    'int tjDecompress2(void *handle, const uint8_t *jpeg, unsigned long size, uint8_t *dst, int width, int pitch, int height, int format, int flags)',
  );
  /** @type {Promise<boolean> | null} */
  let checking = null;
  /** @type {JpegCodec} */
  const codec = {
    agrees: null,
    async encode(raw, options, pool) {
      checking ??= encoderAgrees(encoder, pool);
      codec.agrees = await checking;
      return codec.agrees ? encoder(raw, options, pool) : null;
    },
    async decode(jpeg, scale, pool) {
      if (scans(jpeg) > MAX_SCANS) return null;
      const handle = init();
      if (!handle) return null;
      try {
        const w = [0],
          h = [0],
          subsamp = [0],
          colorspace = [0];
        if (header(handle, jpeg, jpeg.length, w, h, subsamp, colorspace) !== 0) return null;
        if (colorspace[0] !== TJCS_YCbCr && colorspace[0] !== TJCS_RGB) return null;
        const out = {
          width: Math.ceil(w[0] / scale),
          height: Math.ceil(h[0] / scale),
          channels: /** @type {const} */ (3),
        };
        if (out.width * out.height > MAX_DECODED_PIXELS) return null;
        const data = pool.take(out.width * out.height * 3);
        const failed = await callAsync(
          decompress,
          handle,
          jpeg,
          jpeg.length,
          data,
          out.width,
          0,
          out.height,
          TJPF_RGB,
          0,
        );
        if (!failed) return { data, info: out };
        pool.give(data);
        return null;
      } finally {
        destroy(handle);
      }
    },
  };
  return codec;
}

/**
 * RGB pixels to the very JPEG sharp's `jpeg({ quality, progressive, optimiseCoding: true })` writes of them
 * (its libvips resets mozjpeg to libjpeg's defaults: the same standard tables, accurate DCT, 4:2:0 and
 * Huffman optimisation; origin/test/system-codecs.test.js checks the bytes). TurboJPEG 2.x takes the fast
 * DCT below quality 96 unless told otherwise, optimises Huffman tables only when TJ_OPTIMIZE=1 is in the
 * environment (read at each call: set here, for this process and the workers it starts), and writes a JFIF
 * segment that libvips leaves out, cut from its output. Into a buffer of the pool, copied out.
 * @param {any} lib @returns {JpegEncode}
 */
function jpegEncoder(lib) {
  const init = lib.func('void *tjInitCompress()');
  const destroy = lib.func('int tjDestroy(void *handle)');
  const bufferSize = lib.func('unsigned long tjBufSize(int width, int height, int subsamp)');
  const compress = lib.func(
    'int tjCompress2(void *handle, const uint8_t *src, int width, int pitch, int height, int format, _Inout_ uint8_t **jpeg, _Inout_ unsigned long *size, int subsamp, int quality, int flags)',
  );
  const errorText = lib.func('const char *tjGetErrorStr2(void *handle)');
  process.env.TJ_OPTIMIZE = '1';
  return async ({ data, info }, { quality, progressive }, pool) => {
    if (info.channels !== 3) throw new Error(`JPEG encode: ${info.channels} channels, not RGB`);
    const handle = init();
    if (!handle) throw new Error('JPEG encode: tjInitCompress failed');
    const out = pool.take(bufferSize(info.width, info.height, TJSAMP_420));
    try {
      const size = [out.length];
      const flags = TJFLAG_NOREALLOC | TJFLAG_ACCURATEDCT | (progressive ? TJFLAG_PROGRESSIVE : 0);
      const failed = await callAsync(
        compress,
        handle,
        data,
        info.width,
        0,
        info.height,
        TJPF_RGB,
        [out],
        size,
        TJSAMP_420,
        quality,
        flags,
      );
      if (failed) throw new Error(`JPEG encode failed: ${errorText(handle)}`);
      return withoutJfif(out.subarray(0, size[0]));
    } finally {
      pool.give(out);
      destroy(handle);
    }
  };
}

/**
 * The options of sharp's `jpeg()` whose very bytes jpegEncoder writes: libjpeg's standard tables and Huffman
 * optimisation (pipeline/encode.js gives sharp these, and this process's check compares with them).
 * @param {JpegEncodeOptions} options @returns {import('sharp').JpegOptions}
 */
export const sharpJpegOptions = ({ quality, progressive }) => ({
  quality,
  progressive,
  optimiseCoding: true,
  quantisationTable: 0,
});

/**
 * Whether this libjpeg-turbo writes sharp's very bytes, asked once a process with a small image of detail and
 * colour, baseline and progressive: a build without getenv (no Huffman optimisation), a later version or an
 * environment TJ_OPTIMIZE does not reach (a worker thread's is a copy) would write others, and sharp then
 * encodes every JPEG, as before. @param {JpegEncode} encode @param {BufferPool} pool
 */
async function encoderAgrees(encode, pool) {
  const [width, height] = [48, 40];
  const data = Buffer.alloc(width * height * 3);
  for (let i = 0; i < data.length; i += 1)
    data[i] = (i * 7 + (Math.floor(i / 3) % width) * 5 + (i % 3) * 60 + ((i * i) % 13)) & 255;
  const raw = { data, info: { width, height, channels: /** @type {const} */ (3) } };
  try {
    for (const progressive of [false, true]) {
      const ours = await encode(raw, { quality: 80, progressive }, pool);
      const theirs = await sharp(data, { raw: raw.info })
        .jpeg(sharpJpegOptions({ quality: 80, progressive }))
        .toBuffer();
      if (!ours.equals(theirs)) return false;
    }
    return true;
  } catch {
    // either encoder failing on so plain an image: not to be trusted with the variants
    return false;
  }
}

/**
 * A copy of a JPEG without the JFIF segment that opens TurboJPEG's output (SOI, then APP0 "JFIF\0").
 * @param {Buffer} jpeg
 */
function withoutJfif(jpeg) {
  const jfif = jpeg[2] === 0xff && jpeg[3] === 0xe0 && jpeg.toString('latin1', 6, 11) === 'JFIF\0';
  if (!jfif) return Buffer.from(jpeg);
  const end = 4 + jpeg.readUInt16BE(4);
  return Buffer.concat([jpeg.subarray(0, 2), jpeg.subarray(end)]);
}

/**
 * Start-of-scan markers in a JPEG: in the entropy-coded data a 0xFF byte is always followed by 0x00 or a
 * restart marker, so every 0xFF 0xDA is a scan. @param {Buffer} jpeg
 */
export function scans(jpeg) {
  let count = 0;
  for (let at = jpeg.indexOf(0xff); at !== -1 && at < jpeg.length - 1; at = jpeg.indexOf(0xff, at + 1)) {
    if (jpeg[at + 1] === 0xda) count += 1;
  }
  return count;
}

// libwebp's encoder ABI this code was written against (encode.h of 1.2.4, Debian 12's libwebp7): a library of
// another major version refuses it (WebPConfigInitInternal and WebPPictureInitInternal return 0)
const WEBP_ENCODER_ABI_VERSION = 0x020f;
const WEBP_PRESET_DEFAULT = 0;

/**
 * libwebp's advanced lossy API, as its simple one (WebPEncodeRGB) calls it, with the method (sharp's `effort`,
 * 0-6) set: WebPConfigPreset(default, quality), the picture imported from RGB(A), written to memory. sharp's
 * webp({ quality, effort }) writes the same bytes for the same pixels, at every effort
 * (origin/test/system-codecs.test.js). @param {any} koffi @param {any} lib
 * @returns {WebpEncoder & { version: string }}
 */
function libwebp(koffi, lib) {
  const version = lib.func('int WebPGetEncoderVersion()')();
  const { Config, Picture, Writer } = webpStructs(koffi);
  const configInit = lib.func('int WebPConfigInitInternal(void *config, int preset, float quality, int abi)');
  const pictureInit = lib.func('int WebPPictureInitInternal(void *picture, int abi)');
  const importRgb = lib.func('int WebPPictureImportRGB(void *picture, const uint8_t *rgb, int stride)');
  const importRgba = lib.func('int WebPPictureImportRGBA(void *picture, const uint8_t *rgba, int stride)');
  const webpEncode = lib.func('int WebPEncode(const void *config, void *picture)');
  const pictureFree = lib.func('void WebPPictureFree(void *picture)');
  const writerInit = lib.func('void WebPMemoryWriterInit(void *writer)');
  const writerClear = lib.func('void WebPMemoryWriterClear(void *writer)');
  // libwebp's own writer into a growing memory block (the WebPMemoryWriter given as custom_ptr)
  const memoryWrite = BigInt(koffi.address(lib.symbol('WebPMemoryWrite')));
  /** @param {any} memory @param {any} type */
  const fields = (memory, type) => new DataView(koffi.view(memory, koffi.sizeof(type)));
  const at = (/** @type {any} */ type, /** @type {string} */ name) => koffi.offsetof(type, name);
  // zeroed: a picture or a writer freed before its init (an error between) holds no pointer to free
  const allocate = (/** @type {any} */ type) => {
    const memory = koffi.alloc('uint8_t', koffi.sizeof(type));
    new Uint8Array(koffi.view(memory, koffi.sizeof(type))).fill(0);
    return memory;
  };
  // a library of another encoder ABI is not used at all (`auto`: sharp encodes)
  const probe = allocate(Config);
  try {
    if (!configInit(probe, WEBP_PRESET_DEFAULT, 75, WEBP_ENCODER_ABI_VERSION))
      throw new Error(`libwebp ${version}: encoder ABI not ${WEBP_ENCODER_ABI_VERSION.toString(16)}`);
  } finally {
    koffi.free(probe);
  }
  return {
    version: [version >> 16, (version >> 8) & 0xff, version & 0xff].join('.'),
    async encode({ data, info }, quality, effort) {
      const { width, height, channels } = info;
      if (channels !== 3 && channels !== 4) throw new Error(`WebP encode: ${channels} channels`);
      const config = allocate(Config);
      const picture = allocate(Picture);
      const writer = allocate(Writer);
      try {
        if (!configInit(config, WEBP_PRESET_DEFAULT, quality, WEBP_ENCODER_ABI_VERSION))
          throw new Error('WebP config init failed');
        fields(config, Config).setInt32(at(Config, 'method'), effort, true);
        if (!pictureInit(picture, WEBP_ENCODER_ABI_VERSION)) throw new Error('WebP picture init failed');
        writerInit(writer);
        const pic = fields(picture, Picture);
        pic.setInt32(at(Picture, 'width'), width, true);
        pic.setInt32(at(Picture, 'height'), height, true);
        pic.setBigUint64(at(Picture, 'writer'), memoryWrite, true);
        pic.setBigUint64(at(Picture, 'custom_ptr'), BigInt(koffi.address(writer)), true);
        const imported = await callAsync(channels === 3 ? importRgb : importRgba, picture, data, width * channels);
        if (!imported || !(await callAsync(webpEncode, config, picture)))
          throw new Error(`WebP encode failed (error ${pic.getInt32(at(Picture, 'error_code'), true)})`);
        const out = fields(writer, Writer);
        const size = Number(out.getBigUint64(at(Writer, 'size'), true));
        // a copy: the memory is libwebp's, freed below
        return Buffer.from(new Uint8Array(koffi.view(out.getBigUint64(at(Writer, 'mem'), true), size)));
      } finally {
        pictureFree(picture);
        writerClear(writer);
        for (const memory of [config, picture, writer]) koffi.free(memory);
      }
    },
  };
}

/**
 * libwebp's encoder structures (encode.h), for their sizes and the offsets of the fields set here: koffi lays
 * them out by the C ABI. @param {any} koffi
 */
function webpStructs(koffi) {
  const floats = new Set(['quality', 'target_PSNR']);
  const configFields = ['lossless', 'quality', 'method', 'image_hint', 'target_size', 'target_PSNR', 'segments']
    .concat(['sns_strength', 'filter_strength', 'filter_sharpness', 'filter_type', 'autofilter'])
    .concat(['alpha_compression', 'alpha_filtering', 'alpha_quality', 'pass', 'show_compressed', 'preprocessing'])
    .concat(['partitions', 'partition_limit', 'emulate_jpeg_size', 'thread_level', 'low_memory', 'near_lossless'])
    .concat(['exact', 'use_delta_palette', 'use_sharp_yuv', 'qmin', 'qmax']);
  const pointer = 'void *';
  return {
    Config: koffi.struct(Object.fromEntries(configFields.map((name) => [name, floats.has(name) ? 'float' : 'int']))),
    Picture: koffi.struct({
      use_argb: 'int',
      colorspace: 'int',
      width: 'int',
      height: 'int',
      y: pointer,
      u: pointer,
      v: pointer,
      y_stride: 'int',
      uv_stride: 'int',
      a: pointer,
      a_stride: 'int',
      pad1: koffi.array('uint32_t', 2),
      argb: pointer,
      argb_stride: 'int',
      pad2: koffi.array('uint32_t', 3),
      writer: pointer,
      custom_ptr: pointer,
      extra_info_type: 'int',
      extra_info: pointer,
      stats: pointer,
      error_code: 'int',
      progress_hook: pointer,
      user_data: pointer,
      pad3: koffi.array('uint32_t', 3),
      pad4: pointer,
      pad5: pointer,
      pad6: koffi.array('uint32_t', 8),
      memory_: pointer,
      memory_argb_: pointer,
      pad7: koffi.array(pointer, 2),
    }),
    Writer: koffi.struct({ mem: pointer, size: 'size_t', max_size: 'size_t', pad: koffi.array('uint32_t', 1) }),
  };
}

/**
 * Buffers for JPEG files and decoded pixels, used again from one transform to the next. Each new Buffer of a
 * megabyte or more is memory V8 counts against its heap: one per variant made it run a full garbage collection
 * every few variants (a fifth of the service's CPU under load), and each fresh allocation is page faults.
 * Sizes are rounded up to a power of two (from 64 KB) so they fit the next image; at most `maxBytes` are kept.
 */
export class BufferPool {
  /** @param {number} maxBytes */
  constructor(maxBytes) {
    this.maxBytes = maxBytes;
    this.keptBytes = 0;
    /** @type {ArrayBuffer[]} */
    this.free = [];
  }

  /** A Buffer of `size` bytes (contents undefined): give it back with give() once nothing reads it. @param {number} size */
  take(size) {
    let best = -1;
    for (let i = 0; i < this.free.length; i += 1) {
      if (this.free[i].byteLength >= size && (best === -1 || this.free[i].byteLength < this.free[best].byteLength))
        best = i;
    }
    if (best === -1)
      return Buffer.from(new ArrayBuffer(Math.max(65536, 2 ** Math.ceil(Math.log2(Math.max(1, size))))), 0, size);
    const [memory] = this.free.splice(best, 1);
    this.keptBytes -= memory.byteLength;
    return Buffer.from(memory, 0, size);
  }

  /** @param {Buffer} buffer one take() returned */
  give(buffer) {
    const memory = /** @type {ArrayBuffer} */ (buffer.buffer);
    if (this.free.includes(memory) || this.keptBytes + memory.byteLength > this.maxBytes) return;
    this.free.push(memory);
    this.keptBytes += memory.byteLength;
  }

  /** A whole file read into a pooled buffer. @param {string} file */
  async read(file) {
    const handle = await fs.open(file, 'r');
    try {
      const { size } = await handle.stat();
      const buffer = this.take(size);
      try {
        const { bytesRead } = await handle.read(buffer, 0, size, 0);
        return bytesRead === size ? buffer : buffer.subarray(0, bytesRead);
      } catch (err) {
        this.give(buffer);
        throw err;
      }
    } finally {
      await handle.close();
    }
  }
}
