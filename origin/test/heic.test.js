// HEIC (the iPhone's photographs, #39): files made from the real photographs with heif-enc (Debian's
// libheif-examples), portrait and landscape, with alpha, with a Display P3 profile. Uploads accepted and
// scrubbed; /p/ variants of the right size, upright, close to the same photograph's JPEG variant; the
// original served as HEIC to Safari and as a JPEG to other browsers; cut and hostile files a 400;
// HEIC_DECODE=false the same clear 400 as before.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { keyOf } from '../src/keys.js';
import { decode, meanDifference, personalTags, photo, readMetadata, withMetadata } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let refusing;
let dir = '';

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'heic-'));
  [origin, refusing] = await Promise.all([startOrigin(), startOrigin({ HEIC_DECODE: 'false' })]);
});
after(async () => {
  await Promise.all([origin?.stop(), refusing?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * A HEIC made by heif-enc from `source` (a PNG or JPEG): what a phone writes, profile and EXIF carried over.
 * @param {Buffer} source @param {'png' | 'jpg'} extension
 */
function heic(source, extension) {
  const input = path.join(dir, `in-${Math.random().toString(36).slice(2)}.${extension}`);
  const output = `${input}.heic`;
  fs.writeFileSync(input, source);
  execFileSync('heif-enc', ['-q', '85', input, '-o', output], { stdio: 'ignore' });
  return fs.readFileSync(output);
}

const landscape = () =>
  sharp(photo('Path', '1280x800')).resize(640).jpeg({ quality: 95 }).withIccProfile('p3').toBuffer();
// a portrait photograph: its pixels upright (a phone's HEIC turns them with irot, which libheif applies)
const portrait = () => sharp(photo('Path', '1280x800')).resize(640).rotate(90).jpeg({ quality: 95 }).toBuffer();

/** @param {string} url */
async function fetched(url, accept = 'image/avif,image/webp,*/*') {
  const response = await fetch(url, { headers: { accept } });
  return { response, bytes: Buffer.from(await response.arrayBuffer()) };
}

test("a HEIC upload is accepted, stored as uploaded less its location data, under the uploaded bytes' key", async () => {
  const uploaded = withMetadata(heic(await landscape(), 'jpg'), 'heic', [
    '-GPSLatitude=48.8583',
    '-GPSLatitudeRef=N',
    '-GPSLongitude=2.2945',
    '-GPSLongitudeRef=E',
    '-SerialNumber=F2LXK0QJHG7F',
  ]);
  assert.ok(personalTags(readMetadata(uploaded)).length >= 2);
  const response = await tokenUpload(origin.base, uploaded, 'IMG_0001.HEIC');
  assert.equal(response.status, 200, await response.clone().text());
  const { url } = /** @type {{ url: string }} */ (await response.json());
  assert.equal(new URL(url).pathname.split('/')[1], keyOf(uploaded));
  const safari = await fetched(
    url,
    'image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5',
  );
  assert.equal(safari.response.headers.get('content-type'), 'image/heic');
  assert.equal(safari.response.headers.get('vary'), 'Accept');
  assert.equal(safari.bytes.length, uploaded.length, 'the same size: edited in place');
  assert.deepEqual(personalTags(readMetadata(safari.bytes)), []);
  const chrome = await fetched(url);
  assert.equal(chrome.response.headers.get('content-type'), 'image/jpeg', 'other browsers get a JPEG');
  const info = await decode(chrome.bytes);
  assert.deepEqual([info.format, info.width, info.height], ['jpeg', 640, 400], 'of the same size');
});

test("/p/ variants of HEIC photographs: the right size and orientation, close to the JPEG's variant, the profile applied", async () => {
  for (const [name, make] of /** @type {const} */ ([
    ['landscape', landscape],
    ['portrait', portrait],
  ])) {
    const jpeg = await make();
    const url = origin.site.add(`${name}.heic`, heic(jpeg, 'jpg'));
    const reference = origin.site.add(`${name}.jpg`, jpeg);
    const [fromHeic, fromJpeg] = await Promise.all(
      [url, reference].map((source) => fetched(origin.proxied(source, { width: 200, format: 'png' }))),
    );
    assert.equal(fromHeic.response.status, 200, fromHeic.bytes.toString().slice(0, 200));
    const [a, b] = await Promise.all([decode(fromHeic.bytes), decode(fromJpeg.bytes)]);
    assert.deepEqual([a.width, a.height], [b.width, b.height], `${name}: the JPEG's size and orientation`);
    // mean absolute difference per channel, 0-255: HEVC at q85 against a JPEG at q95 of the same pixels
    const [rawHeic, rawJpeg] = await Promise.all(
      [fromHeic.bytes, fromJpeg.bytes].map((bytes) => sharp(bytes).removeAlpha().raw().toBuffer()),
    );
    const difference = meanDifference(rawHeic, rawJpeg);
    assert.ok(difference < 6, `${name}: ${difference.toFixed(2)} from the JPEG's variant`);
    if (name === 'landscape') {
      // its Display P3 profile applied: nearer the JPEG's variant than to the same pixels taken as sRGB
      const unconverted = await sharp(jpeg, { ignoreIcc: true })
        .resize(a.width, a.height)
        .removeAlpha()
        .raw()
        .toBuffer();
      const asSrgb = meanDifference(rawHeic, unconverted);
      assert.ok(
        difference < asSrgb * 0.8,
        `the profile applied: ${difference.toFixed(2)} from the converted variant, ${asSrgb.toFixed(2)} from unconverted pixels`,
      );
    }
    for (const format of ['jpeg', 'webp', 'avif']) {
      const { response } = await fetched(origin.proxied(url, { width: 120, format }));
      assert.equal(response.status, 200, `${name} as ${format}`);
    }
  }
});

test('HEIC variants are decoded by libavcodec (the fast path), one with alpha by libheif', async () => {
  const decoded = (/** @type {string} */ decode) =>
    metricValue(origin.metricsUrl, 'origin_transform_codecs_total', { decode, encode: 'sharp' });
  const before = await Promise.all([decoded('libavcodec'), decoded('libheif')]);
  const opaque = origin.site.add('opaque.heic', heic(await landscape(), 'jpg'));
  const alpha = origin.site.add(
    'with-alpha.heic',
    heic(
      await sharp({ create: { width: 64, height: 48, channels: 4, background: '#c0402080' } })
        .png()
        .toBuffer(),
      'png',
    ),
  );
  for (const url of [opaque, alpha])
    assert.equal((await fetched(origin.proxied(url, { width: 40, format: 'png' }))).response.status, 200);
  const after = await Promise.all([decoded('libavcodec'), decoded('libheif')]);
  assert.deepEqual([after[0] - before[0], after[1] - before[1]], [1, 1]);
});

test('a HEIC with alpha keeps its transparency in a PNG variant', async () => {
  const png = await sharp({
    create: { width: 320, height: 200, channels: 4, background: { r: 200, g: 40, b: 30, alpha: 0.5 } },
  })
    .png()
    .toBuffer();
  const url = origin.site.add('alpha.heic', heic(png, 'png'));
  const { response, bytes } = await fetched(origin.proxied(url, { width: 160, format: 'png' }));
  assert.equal(response.status, 200);
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  assert.equal(info.channels, 4);
  assert.ok(Math.abs(data[3] - 128) < 8, `alpha ${data[3]}`);
});

test('cut, truncated and hostile HEIC files are a 400 JSON error, and the origin keeps serving', async () => {
  const whole = heic(await landscape(), 'jpg');
  const bomb = Buffer.from(whole);
  // the image's declared size (its ispe property) turned into 30000 × 30000
  const ispe = bomb.indexOf(Buffer.from('ispe', 'latin1'));
  bomb.writeUInt32BE(30000, ispe + 8);
  bomb.writeUInt32BE(30000, ispe + 12);
  /** @type {Array<[string, Buffer]>} */
  const cases = [
    ['cut', whole.subarray(0, Math.floor(whole.length / 2))],
    ['header-only', whole.subarray(0, 300)],
    ['bomb', bomb],
  ];
  for (const [name, bytes] of cases) {
    const url = origin.site.add(`broken-${name}.heic`, bytes);
    const { response, bytes: answer } = await fetched(origin.proxied(url, { width: 100 }));
    assert.equal(response.status, 400, `${name}: ${answer.toString().slice(0, 200)}`);
    assert.match(
      JSON.parse(answer.toString()).error.name,
      /^(invalid_image|image_too_large|unsupported_format)$/,
      name,
    );
  }
  assert.equal((await fetched(`${origin.base}/healthz`)).response.status, 200);
});

test('HEIC_DECODE=false: a HEIC is the clear 400 it was', async () => {
  const url = refusing.site.add('refused.heic', heic(await landscape(), 'jpg'));
  const { response, bytes } = await fetched(refusing.proxied(url, { width: 100 }));
  assert.equal(response.status, 400);
  const { error } = JSON.parse(bytes.toString());
  assert.deepEqual([error.name, error.info.format], ['unsupported_format', 'heic']);
});
