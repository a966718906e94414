// FFmpeg's HEVC decoder (Debian's libavcodec59), called through koffi, for the HEVC pictures of a HEIC:
// on a 12-megapixel photograph it decodes in about 60 % of the CPU time libde265 takes (bench/heic), and
// FFmpeg's decoders are fuzzed continuously. One thread per picture (the CPU a variant costs is what counts
// here); each call runs on libuv's thread pool. The frame's layout is read from libavutil 57's AVFrame (the
// library is refused at any other major version).
import { callAsync, loadOnce } from '../codecs.js';

/** Bytes FFmpeg may read past a packet's end (AV_INPUT_BUFFER_PADDING_SIZE). */
const PADDING = 64;
const EAGAIN = -11;
const PLANAR_8BIT_420 = ['yuv420p', 'yuvj420p'];

/**
 * @typedef {{ width: number, height: number, planes: Array<{ data: Uint8Array, stride: number }> }} Frame
 *   a decoded 8-bit 4:2:0 picture: Y, Cb, Cr, each `stride` bytes a row; valid until the next picture
 * @typedef {{ each: (pictures: Buffer[], use: (frame: Frame, index: number) => Promise<void> | void,
 *   options: { filters?: boolean, maxPixels: number }) => Promise<void> }} HevcDecoder
 *   decodes the pictures in order, handing each frame to `use` before the next is decoded; filters: false skips
 *   the deblocking filter (2 % of the CPU), for pictures shrunk so far their block edges vanish; maxPixels: a
 *   larger picture is refused before it is decoded
 */

/** The system's libavcodec, or null where it (or koffi) is not there or not the version this reads. */
export const hevcDecoder = loadOnce((koffi) =>
  libavcodec(koffi, koffi.load('libavcodec.so.59'), koffi.load('libavutil.so.57')),
);

/** @param {any} koffi @param {any} avcodec @param {any} avutil @returns {HevcDecoder | null} */
function libavcodec(koffi, avcodec, avutil) {
  const major = (/** @type {number} */ version) => version >>> 16;
  if (major(avcodec.func('unsigned int avcodec_version()')()) !== 59) return null;
  if (major(avutil.func('unsigned int avutil_version()')()) !== 57) return null;
  const f = {
    find: avcodec.func('void *avcodec_find_decoder_by_name(const char *name)'),
    alloc: avcodec.func('void *avcodec_alloc_context3(void *codec)'),
    open: avcodec.func('int avcodec_open2(void *ctx, void *codec, void *options)'),
    freeContext: avcodec.func('void avcodec_free_context(_Inout_ void **ctx)'),
    option: avutil.func('int av_opt_set(void *obj, const char *name, const char *value, int flags)'),
    packet: avcodec.func('void *av_packet_alloc()'),
    freePacket: avcodec.func('void av_packet_free(_Inout_ void **packet)'),
    fromData: avcodec.func('int av_packet_from_data(void *packet, void *data, int size)'),
    malloc: avutil.func('void *av_mallocz(size_t size)'),
    free: avutil.func('void av_free(void *ptr)'),
    send: avcodec.func('int avcodec_send_packet(void *ctx, void *packet)'),
    receive: avcodec.func('int avcodec_receive_frame(void *ctx, void *frame)'),
    frame: avutil.func('void *av_frame_alloc()'),
    freeFrame: avutil.func('void av_frame_free(_Inout_ void **frame)'),
    unref: avutil.func('void av_frame_unref(void *frame)'),
    flush: avcodec.func('void avcodec_flush_buffers(void *ctx)'),
    formatName: avutil.func('const char *av_get_pix_fmt_name(int format)'),
  };
  koffi.struct('cdn_AVFrameHead', {
    data: koffi.array('void *', 8),
    linesize: koffi.array('int', 8),
    extended_data: 'void *',
    width: 'int',
    height: 'int',
    nb_samples: 'int',
    format: 'int',
  });
  const codec = f.find('hevc');
  if (!codec) return null;
  // a hostile picture's complaints are not the service's log (AV_LOG_QUIET); its failure is the answer
  avutil.func('void av_log_set_level(int level)')(-8);

  /** One picture into the decoder (its data copied into FFmpeg's padded buffer). @param {any} ctx @param {Buffer} picture */
  async function send(ctx, picture) {
    const data = f.malloc(picture.length + PADDING);
    if (!data) throw new Error('libavcodec: out of memory');
    new Uint8Array(koffi.view(data, picture.length)).set(picture);
    const packet = [f.packet()];
    try {
      // the packet owns the data once it takes it; until then it is ours to free
      if (!packet[0] || f.fromData(packet[0], data, picture.length) < 0) {
        f.free(data);
        throw new Error('libavcodec: packet');
      }
      if ((await callAsync(f.send, ctx, packet[0])) < 0) throw new Error('libavcodec: the picture does not decode');
    } finally {
      f.freePacket(packet);
    }
  }

  /** The decoded picture as planes. @param {any} frame @returns {Frame} */
  function frameOf(frame) {
    const head = koffi.decode(frame, 'cdn_AVFrameHead');
    if (!PLANAR_8BIT_420.includes(f.formatName(head.format))) throw new Error('libavcodec: not 8-bit 4:2:0');
    const rows = [head.height, (head.height + 1) >> 1, (head.height + 1) >> 1];
    const planes = rows.map((count, i) => ({
      data: new Uint8Array(koffi.view(head.data[i], head.linesize[i] * count)),
      stride: head.linesize[i],
    }));
    return { width: head.width, height: head.height, planes };
  }

  return {
    async each(pictures, use, { filters = true, maxPixels }) {
      const ctx = [f.alloc(codec)];
      const frame = [f.frame()];
      try {
        f.option(ctx[0], 'threads', '1', 0);
        // the size the container declared is the most a picture may have: a stream that says otherwise is
        // refused before FFmpeg allocates its frame (av_image_check_size2)
        f.option(ctx[0], 'max_pixels', String(maxPixels), 0);
        if (!filters) f.option(ctx[0], 'skip_loop_filter', 'all', 0);
        if (f.open(ctx[0], codec, null) < 0) throw new Error('libavcodec: HEVC decoder');
        for (const [index, picture] of pictures.entries()) {
          await send(ctx[0], picture);
          let status = f.receive(ctx[0], frame[0]);
          if (status === EAGAIN) {
            // a decoder that holds the picture back gives it up once drained, and is reset for the next
            f.send(ctx[0], null);
            status = f.receive(ctx[0], frame[0]);
            f.flush(ctx[0]);
          }
          if (status < 0) throw new Error('libavcodec: no picture');
          await use(frameOf(frame[0]), index);
          f.unref(frame[0]);
        }
      } finally {
        f.freeFrame(frame);
        f.freeContext(ctx);
      }
    },
  };
}
