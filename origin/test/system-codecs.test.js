import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { BufferPool, loadSystemCodecs, scans } from '../src/codecs.js';
import { jpegShrinkOnLoad, plan, probe, transform } from '../src/pipeline/index.js';
import { meanDifference, photo } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { TRANSFORM_OPTIONS, startOrigin } from './harness.js';

// the codecs the stack installs (Debian's libturbojpeg0 and libwebp7): `on` fails when one is missing
const codecs = loadSystemCodecs('on');
const OPTIONS = { ...TRANSFORM_OPTIONS, timeoutS: 30 };
/** @type {string} */
let dir;

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'codecs-'));
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** @param {string} name @param {Buffer} bytes */
function file(name, bytes) {
  const at = path.join(dir, name);
  fs.writeFileSync(at, bytes);
  return at;
}

/**
 * The variant made both ways: with the system codecs and by sharp alone.
 * @param {string} source @param {{ width: number | null, height: number | null, mode: 'fit' | 'cover', format: string }} want
 * @param {{ degraded?: boolean, options?: typeof OPTIONS }} [how] degraded: the cheaper WebP a deep queue answers
 */
async function bothWays(source, want, { degraded = false, options = OPTIONS } = {}) {
  const p = plan(
    await probe(source, { maxPixels: options.maxPixels, maxFrames: 1 }),
    { ...want, accept: '' },
    degraded,
  );
  const system = await transform(source, p, { ...options, codecs });
  const alone = await transform(source, p, options);
  assert.deepEqual(alone.codecs, { decode: 'sharp', encode: 'sharp' });
  return { system, alone };
}

/** Pixels of an image and the mean absolute difference of two. @param {Buffer} a @param {Buffer} b */
async function pixelDifference(a, b) {
  const [x, y] = await Promise.all([
    sharp(a).raw().toBuffer({ resolveWithObject: true }),
    sharp(b).raw().toBuffer({ resolveWithObject: true }),
  ]);
  assert.deepEqual([x.info.width, x.info.height, x.info.channels], [y.info.width, y.info.height, y.info.channels]);
  return meanDifference(x.data, y.data);
}

test('a JPEG original decoded by libjpeg-turbo (its JPEG encoded by libjpeg-turbo, its WebP by libwebp) gives the very bytes sharp alone gives', async () => {
  // Path: baseline, 2560×1600; Autumn: progressive; 1000 px wide is a shrink of 2.56 (sharp decodes that at full
  // size), 64 px at 1/8, 512 px at 1/4, cover 300×300 crops
  const wants = /** @type {const} */ ([
    { width: 512, height: 512, mode: 'fit' },
    { width: 300, height: 300, mode: 'cover' },
    { width: 1000, height: null, mode: 'fit' },
    { width: null, height: 64, mode: 'fit' },
    { width: 640, height: 200, mode: 'cover' },
  ]);
  for (const name of ['Path', 'Autumn']) {
    for (const want of wants) {
      for (const format of ['jpeg', 'webp']) {
        const { system, alone } = await bothWays(photo(name, '1920x1080'), { ...want, format });
        assert.deepEqual(
          system.codecs,
          { decode: 'libjpeg-turbo', encode: format === 'webp' ? 'libwebp' : 'libjpeg-turbo' },
          `${name} ${format}`,
        );
        assert.ok(
          system.data.equals(alone.data),
          `${name} ${JSON.stringify(want)} ${format}: ${system.data.length} bytes against ${alone.data.length}`,
        );
      }
    }
  }
  const { system, alone } = await bothWays(photo('Kite', '1920x1080'), {
    width: 256,
    height: 256,
    mode: 'fit',
    format: 'avif',
  });
  assert.equal(system.codecs.decode, 'libjpeg-turbo');
  assert.ok(system.data.equals(alone.data), 'AVIF from the same pixels');
  // PNG: the same pixels (the pHYs density differs: raw pixels carry none)
  const png = await bothWays(photo('Kite', '1920x1080'), { width: 256, height: 256, mode: 'fit', format: 'png' });
  assert.equal(await pixelDifference(png.system.data, png.alone.data), 0);
});

test("a WebP at every effort (WEBP_EFFORT 0-6), and a degraded one (effort 1), is libwebp's with sharp's very bytes", async () => {
  const source = photo('Path', '1920x1080');
  const want = /** @type {const} */ ({ width: 512, height: 512, mode: 'fit', format: 'webp' });
  const sizes = [];
  for (let effort = 0; effort <= 6; effort += 1) {
    const { system, alone } = await bothWays(source, want, { options: { ...OPTIONS, webpEffort: effort } });
    assert.deepEqual(system.codecs, { decode: 'libjpeg-turbo', encode: 'libwebp' }, `effort ${effort}`);
    assert.ok(
      system.data.equals(alone.data),
      `effort ${effort}: ${system.data.length} bytes against ${alone.data.length}`,
    );
    sizes.push(system.data.length);
  }
  // the efforts really differ: effort 0 makes the largest file, 6 one smaller than 4's
  assert.ok(sizes[0] > sizes[4] && sizes[6] < sizes[4], `bytes by effort: ${sizes}`);
  const degraded = await bothWays(source, { ...want, format: 'avif' }, { degraded: true });
  assert.equal((await sharp(degraded.system.data).metadata()).format, 'webp');
  assert.deepEqual(degraded.system.codecs, { decode: 'libjpeg-turbo', encode: 'libwebp' });
  assert.ok(degraded.system.data.equals(degraded.alone.data), 'degraded: the same bytes');
  const effortOne = await bothWays(source, want, { options: { ...OPTIONS, webpEffort: 1 } });
  assert.ok(degraded.system.data.equals(effortOne.system.data), "degraded is effort 1's");
});

test("a JPEG at every quality and scan setting libjpeg-turbo takes is its own with sharp's very bytes; trellis, a placeholder and an unusual table are sharp's", async () => {
  const wants = /** @type {const} */ ([
    { width: 64, height: null, mode: 'fit' },
    { width: 1000, height: null, mode: 'fit' },
    { width: 640, height: 480, mode: 'cover' },
  ]);
  for (const name of ['Path', 'Kite']) {
    for (const jpegQuality of [40, 80, 95, 100]) {
      for (const jpegProgressive of [false, true]) {
        for (const want of wants) {
          const options = { ...OPTIONS, jpegQuality, jpegProgressive };
          const { system, alone } = await bothWays(photo(name, '1920x1080'), { ...want, format: 'jpeg' }, { options });
          const of = `${name} q${jpegQuality}${jpegProgressive ? ' progressive' : ''} ${JSON.stringify(want)}`;
          assert.deepEqual(system.codecs, { decode: 'libjpeg-turbo', encode: 'libjpeg-turbo' }, of);
          assert.ok(system.data.equals(alone.data), `${of}: ${system.data.length} bytes against ${alone.data.length}`);
        }
      }
    }
  }
  // the settings only sharp's mozjpeg has, and a placeholder's own settings: sharp encodes them
  const source = photo('Path', '1920x1080');
  const want = /** @type {const} */ ({ width: 512, height: null, mode: 'fit', format: 'jpeg' });
  for (const options of [
    { ...OPTIONS, jpegTrellis: true },
    { ...OPTIONS, jpegTable: 3 },
  ]) {
    const { system, alone } = await bothWays(source, want, { options });
    assert.deepEqual(system.codecs, { decode: 'libjpeg-turbo', encode: 'sharp' });
    assert.ok(system.data.equals(alone.data));
  }
  const info = await probe(source, { maxPixels: OPTIONS.maxPixels, maxFrames: 1 });
  const blur = plan(info, { width: 20, height: null, mode: 'fit', format: 'jpeg', accept: '', blur: true }, false);
  assert.equal((await transform(source, blur, { ...OPTIONS, codecs })).codecs.encode, 'sharp');
  // what is not RGB is refused, and the next encode is made
  const jpeg = /** @type {import('../src/codecs.js').JpegCodec} */ (codecs.jpeg);
  const rgba = { data: Buffer.alloc(8 * 8 * 4, 100), info: { width: 8, height: 8, channels: 4 } };
  await assert.rejects(jpeg.encode(rgba, { quality: 80, progressive: false }, codecs.buffers), /4 channels/);
  const rgb = { data: Buffer.alloc(64 * 48 * 3, 200), info: { width: 64, height: 48, channels: 3 } };
  const made = /** @type {Buffer} */ (await jpeg.encode(rgb, { quality: 80, progressive: false }, codecs.buffers));
  assert.equal(jpeg.agrees, true, 'this libjpeg-turbo writes sharp’s bytes');
  assert.deepEqual(
    await sharp(made)
      .metadata()
      .then(({ format, width, height }) => [format, width, height]),
    ['jpeg', 64, 48],
  );
});

test("where libjpeg-turbo would not write sharp's bytes (TJ_OPTIMIZE not reaching it), sharp encodes every JPEG, the same bytes", async () => {
  const unsure = loadSystemCodecs('on');
  delete process.env.TJ_OPTIMIZE; // as in a worker thread's copy of the environment
  try {
    const source = photo('Kite', '1920x1080');
    const p = plan(
      await probe(source, { maxPixels: OPTIONS.maxPixels, maxFrames: 1 }),
      {
        width: 512,
        height: null,
        mode: 'fit',
        format: 'jpeg',
        accept: '',
      },
      false,
    );
    for (let i = 0; i < 2; i += 1) {
      const made = await transform(source, p, { ...OPTIONS, codecs: unsure });
      assert.deepEqual(made.codecs, { decode: 'libjpeg-turbo', encode: 'sharp' }, `encode ${i + 1}`);
      assert.ok(made.data.equals((await transform(source, p, OPTIONS)).data));
    }
    assert.equal(unsure.jpeg?.agrees, false);
  } finally {
    process.env.TJ_OPTIMIZE = '1';
  }
});

test('a WebP libwebp refuses (wider than its 16383 px) is an error, and the next encode is made', async () => {
  const webp = /** @type {import('../src/codecs.js').WebpEncoder} */ (codecs.webp);
  const wide = { data: Buffer.alloc(20000 * 2 * 3, 128), info: { width: 20000, height: 2, channels: 3 } };
  await assert.rejects(webp.encode(wide, 80, 4), /WebP encode failed \(error 5\)/);
  const small = { data: Buffer.alloc(64 * 64 * 3, 200), info: { width: 64, height: 64, channels: 3 } };
  assert.equal((await sharp(await webp.encode(small, 80, 4)).metadata()).width, 64);
});

test('every EXIF orientation: the same size as sharp alone, the same pixels within rounding', async () => {
  const small = await sharp(photo('Kite', '1920x1080')).resize(1280).jpeg({ quality: 90 }).toBuffer();
  for (let orientation = 1; orientation <= 8; orientation += 1) {
    const source = file(
      `o${orientation}.jpg`,
      await sharp(small).withMetadata({ orientation }).jpeg({ quality: 90 }).toBuffer(),
    );
    for (const want of /** @type {const} */ ([
      { width: 300, height: 300, mode: 'fit' },
      { width: 200, height: 120, mode: 'cover' },
    ])) {
      const { system, alone } = await bothWays(source, { ...want, format: 'png' });
      assert.equal(system.codecs.decode, 'libjpeg-turbo');
      const difference = await pixelDifference(system.data, alone.data);
      // a turned photograph is rotated before the resize instead of after: a fraction of a level of 255; a
      // wrong turn would be tens
      if (orientation <= 4) assert.equal(difference, 0, `orientation ${orientation}`);
      else assert.ok(difference < 1, `orientation ${orientation} ${JSON.stringify(want)}: ${difference}`);
    }
  }
});

test("what libjpeg-turbo leaves to sharp: greyscale, CMYK, a foreign profile, a cut file; the answer is sharp's own", async () => {
  const base = sharp(photo('Kite', '1920x1080')).resize(800);
  const sources = {
    grey: await base.clone().toColourspace('b-w').jpeg().toBuffer(),
    cmyk: await base.clone().toColourspace('cmyk').jpeg().toBuffer(),
    p3: await base.clone().withIccProfile('p3').jpeg().toBuffer(),
  };
  for (const [name, bytes] of Object.entries(sources)) {
    const { system, alone } = await bothWays(file(`${name}.jpg`, bytes), {
      width: 256,
      height: 256,
      mode: 'fit',
      format: 'webp',
    });
    assert.deepEqual(system.codecs, { decode: 'sharp', encode: 'sharp' }, name);
    assert.ok(system.data.equals(alone.data), name);
  }
  // cut in half: libjpeg-turbo warns, so sharp decides, and refuses it as before
  const whole = fs.readFileSync(photo('Path', '1920x1080'));
  const cut = file('cut.jpg', whole.subarray(0, whole.length >> 1));
  const p = plan(
    await probe(cut, { maxPixels: OPTIONS.maxPixels, maxFrames: 1 }),
    { width: 256, height: 256, mode: 'fit', format: 'jpeg', accept: '' },
    false,
  );
  assert.ok(p.jpeg, "its header is a plain JPEG's");
  for (const options of [{ ...OPTIONS, codecs }, OPTIONS]) {
    await assert.rejects(transform(cut, p, options), { status: 400, name: 'invalid_image' });
  }
});

test('a progressive JPEG of too many scans is not decoded by libjpeg-turbo (a CPU bomb goes to sharp and its timeout)', async () => {
  assert.equal(scans(fs.readFileSync(photo('Autumn', '1920x1080'))), 10, 'a real progressive photograph');
  assert.ok(scans(fs.readFileSync(photo('Path', '1920x1080'))) <= 2, 'a baseline one (and its EXIF thumbnail)');
  // stuffed bytes (0xFF 0x00) in the entropy-coded data are not markers
  assert.equal(scans(Buffer.from([0xff, 0xd8, 0xff, 0xda, 0x12, 0xff, 0x00, 0xda, 0xff, 0xd9])), 1);
  const bomb = Buffer.concat([
    Buffer.from([0xff, 0xd8]),
    ...Array.from({ length: 101 }, () => Buffer.from([0xff, 0xda, 0x00, 0x08])),
  ]);
  const pool = new BufferPool(1 << 20);
  let taken = 0;
  pool.take = (size) => {
    taken += 1;
    return Buffer.alloc(size);
  };
  assert.equal(await /** @type {NonNullable<typeof codecs.jpeg>} */ (codecs.jpeg).decode(bomb, 1, pool), null);
  assert.equal(taken, 0, 'refused before any pixels are allocated');
});

test('the DCT scale is the one sharp picks: the largest of 8, 4, 2 under the shrink, halved on its whole part', () => {
  assert.equal(jpegShrinkOnLoad(5), 4, '2560 px to 512');
  assert.equal(jpegShrinkOnLoad(2.56), 1, '2560 px to 1000: sharp decodes whole');
  assert.equal(jpegShrinkOnLoad(4.27), 2);
  assert.equal(jpegShrinkOnLoad(3), 2);
  assert.equal(jpegShrinkOnLoad(25), 8);
  assert.equal(jpegShrinkOnLoad(8.5), 4);
  assert.equal(jpegShrinkOnLoad(1.9), 1);
});

test('the buffer pool gives memory back out for the next image, within its bound', async () => {
  const pool = new BufferPool(4 * 1024 * 1024);
  const first = pool.take(700_000);
  assert.equal(first.length, 700_000);
  pool.give(first);
  const second = pool.take(900_000);
  assert.equal(second.buffer, first.buffer, 'the same memory: sizes round up to a power of two');
  const third = pool.take(900_000);
  assert.notEqual(third.buffer, second.buffer, 'memory in use is never handed out twice');
  pool.give(second);
  pool.give(second);
  assert.equal(pool.keptBytes, 1024 * 1024, 'given back once');
  pool.give(third);
  pool.give(pool.take(3 * 1024 * 1024));
  assert.equal(pool.keptBytes, 2 * 1024 * 1024, 'past the bound it keeps nothing more');
  const bytes = fs.readFileSync(photo('Kite', '1920x1080'));
  const read = await pool.read(photo('Kite', '1920x1080'));
  assert.ok(read.equals(bytes));
  await assert.rejects(pool.read(path.join(dir, 'missing.jpg')), { code: 'ENOENT' });
});

test('the service counts what decoded and encoded each variant; SYSTEM_CODECS=off leaves all to sharp; on transform loops and in worker processes too', async () => {
  // TRANSFORM_WORKER_PIXELS=1: every variant made in a worker process (as a warmer's, a large one, an AVIF)
  for (const [setting, loops, workerPixels] of [
    ['auto', '-1', '4000000'],
    ['off', '-1', '4000000'],
    ['auto', '2', '4000000'],
    ['auto', '-1', '1'],
    ['off', '-1', '1'],
  ]) {
    const origin = await startOrigin({
      SYSTEM_CODECS: setting,
      TRANSFORM_LOOPS: loops,
      TRANSFORM_WORKER_PIXELS: workerPixels,
    });
    try {
      const jpeg = origin.site.add('photo.jpg', fs.readFileSync(photo('Kite', '1920x1080')));
      const png = origin.site.add('photo.png', await sharp(photo('Kite', '1920x1080')).resize(600).png().toBuffer());
      for (const [source, format] of [
        [jpeg, 'webp'],
        [jpeg, 'jpeg'],
        [png, 'webp'],
      ]) {
        const response = await fetch(origin.proxied(source, { width: 320, format }));
        assert.equal(response.status, 200);
        assert.equal((await sharp(Buffer.from(await response.arrayBuffer())).metadata()).width, 320);
      }
      const count = (/** @type {string} */ decode, /** @type {string} */ encode) =>
        metricValue(origin.metricsUrl, 'origin_transform_codecs_total', { decode, encode });
      // each a first or a small variant: decoded alone, no pixels kept (kept-pixels.js)
      if (setting === 'auto') {
        assert.deepEqual(
          [
            await count('libjpeg-turbo', 'libwebp'),
            await count('libjpeg-turbo', 'libjpeg-turbo'),
            await count('sharp', 'sharp'),
          ],
          [1, 1, 1],
          `loops ${loops}, worker pixels ${workerPixels}`,
        );
      } else {
        assert.equal(await count('sharp', 'sharp'), 3);
      }
    } finally {
      await origin.stop();
    }
  }
});
