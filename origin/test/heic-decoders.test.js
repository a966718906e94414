// The HEIC fast path (origin/src/heic/planes.js: our HEIF reader, FFmpeg's HEVC decoder, planes shrunk
// before they become RGB) against libheif, the reference, on files made from the real photographs: single
// pictures and an iPhone's grid of tiles, turned and mirrored every way HEIF can, with a Display P3 profile.
// Each variant has libheif's size and orientation and is within a mean of 2.5 levels (0-255, per channel) of
// libheif's pixels resized the same way. Mutated files never get past it as anything but a 400 or libheif's turn.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { heicDecoder } from '../src/heic/libheif.js';
import { hevcDecoder } from '../src/heic/avcodec.js';
import { heifLayout } from '../src/heic/container.js';
import { decodeShrunk, orientationOf } from '../src/heic/planes.js';
import { plan, probe, transform } from '../src/pipeline/index.js';
import { heifEnc, heifFile, pictureOf } from '../../test/support/heif.js';
import { TRANSFORM_OPTIONS } from './harness.js';
import { meanDifference, photo } from '../../test/support/images.js';

let dir = '';
/** @type {Buffer} */
let landscape;
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'heic-decoders-'));
  // a photograph with a Display P3 profile (its colr box is carried into every file made here)
  landscape = await sharp(photo('Path', '1280x800'))
    .resize(640, 400)
    .jpeg({ quality: 95 })
    .withIccProfile('p3')
    .toBuffer();
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/**
 * A `width` px PNG variant of `heic` through the origin's pipeline, and libheif's decode of the same file
 * resized to its size. @param {Buffer} heic @param {number} width
 */
async function variantAndReference(heic, width) {
  const file = path.join(dir, `${Math.random().toString(36).slice(2)}.heic`);
  fs.writeFileSync(file, heic);
  const source = await probe(file, { maxPixels: TRANSFORM_OPTIONS.maxPixels, maxFrames: 1, heic: true });
  const p = plan(source, { width, height: null, mode: 'fit', format: 'png', accept: '' }, false);
  const output = await transform(file, p, TRANSFORM_OPTIONS);
  const variant = await sharp(output.data).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const { tiff } = await /** @type {import('../src/heic/libheif.js').HeicDecoder} */ (heicDecoder()).decode(
    heic,
    Infinity,
  );
  const resized = (/** @type {boolean} */ ignoreIcc) =>
    sharp(tiff, { ignoreIcc })
      .resize(variant.info.width, variant.info.height, { fit: 'fill' })
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
  const [reference, unconverted] = await Promise.all([resized(false), resized(true)]);
  return {
    decoder: output.codecs.decode,
    variant,
    reference,
    unconverted,
    shown: { width: source.width, height: source.height },
  };
}

/** @param {Awaited<ReturnType<typeof variantAndReference>>} made @param {string} name */
function assertLikeLibheif({ decoder, variant, reference, unconverted, shown }, name) {
  assert.equal(decoder, 'libavcodec', `${name}: made by the fast path`);
  const ratio = (/** @type {{ width: number, height: number }} */ size) => size.width / size.height;
  assert.ok(Math.abs(ratio(variant.info) - ratio(shown)) < 0.02, `${name}: libheif's orientation`);
  const difference = meanDifference(variant.data, reference.data);
  assert.ok(difference < 2.5, `${name}: ${difference.toFixed(2)} from libheif's pixels`);
  // the Display P3 profile applied: nearer libheif's converted pixels than to its pixels taken as sRGB
  const asSrgb = meanDifference(variant.data, unconverted.data);
  assert.ok(difference < asSrgb * 0.6, `${name}: the profile applied (${difference.toFixed(2)}, ${asSrgb.toFixed(2)})`);
}

test('single pictures at every plane shrink: libheif size, pixels within 2.5 levels, the profile applied', async () => {
  const heic = heifEnc(landscape);
  for (const width of [640, 320, 160, 80, 40]) assertLikeLibheif(await variantAndReference(heic, width), `${width} px`);
});

test('every rotation and mirroring HEIF can write, alone and combined, as libheif turns them', async () => {
  const picture = pictureOf(heifEnc(landscape));
  /** @type {Array<Array<import('../../test/support/heif.js').Transform>>} */
  const cases = [
    [['irot', 1]],
    [['irot', 2]],
    [['irot', 3]],
    [['imir', 0]],
    [['imir', 1]],
    [
      ['irot', 1],
      ['imir', 0],
    ],
    [
      ['imir', 1],
      ['irot', 3],
    ],
    [
      ['irot', 1],
      ['imir', 1],
    ],
  ];
  for (const transforms of cases) {
    const made = await variantAndReference(heifFile([picture], { transforms }), 200);
    assertLikeLibheif(made, JSON.stringify(transforms));
  }
  // every combination is one of the eight orientations
  assert.equal(orientationOf([{ kind: 'rotate', quarters: 1 }]), 8);
  assert.equal(orientationOf([{ kind: 'rotate', quarters: 3 }]), 6);
});

test("an iPhone's grid of tiles, cut at the right and bottom, turned: put together as libheif does", async () => {
  // 2 × 2 tiles of 320 × 200 from the photograph padded to 640 × 400; the image is 630 × 390
  const cut = await sharp(landscape).extract({ left: 0, top: 0, width: 630, height: 390 }).toBuffer();
  const padded = await sharp(cut).extend({ right: 10, bottom: 10, extendWith: 'copy' }).toBuffer();
  const tiles = [];
  for (const [left, top] of [
    [0, 0],
    [320, 0],
    [0, 200],
    [320, 200],
  ]) {
    const tile = await sharp(padded)
      .extract({ left, top, width: 320, height: 200 })
      .withIccProfile('p3')
      .jpeg({ quality: 95 })
      .toBuffer();
    tiles.push(pictureOf(heifEnc(tile)));
  }
  for (const transforms of /** @type {Array<Array<import('../../test/support/heif.js').Transform>>} */ ([
    [],
    [['irot', 3]],
  ])) {
    const heic = heifFile(tiles, { columns: 2, width: 630, height: 390, transforms });
    const made = await variantAndReference(heic, 315); // half: the planes shrunk by 2 exactly
    assert.deepEqual(
      [made.shown.width, made.shown.height],
      transforms.length ? [390, 630] : [630, 390],
      'the grid output size',
    );
    assertLikeLibheif(made, `grid ${JSON.stringify(transforms)}`);
  }
});

test('a grid whose 144 tiles all name one extent is not copied 144 times: left to libheif at once', async () => {
  const picture = pictureOf(heifEnc(await sharp(landscape).resize(64, 40).toBuffer()));
  // the first tile's data made large (what the tiles would copy), the rest naming it
  const big = { ...picture, data: Buffer.concat([picture.data, Buffer.alloc(4_000_000)]) };
  const heic = heifFile([big, ...Array(143).fill(picture)], { columns: 12, sharedData: true });
  assert.ok(heic.length < 5_000_000, `${heic.length} bytes`);
  const started = performance.now();
  assert.equal(await decodeShrunk(heic, { factor: 1, maxPixels: 4e6 }), null, 'not taken by the fast path');
  assert.ok(performance.now() - started < 1000, `${Math.round(performance.now() - started)} ms`);
});

/**
 * What the fast path makes of `bytes`: its kind, and the answer itself (the decoded pixels' digest).
 * @param {Buffer} bytes @param {string} label @returns {Promise<{ kind: 'decoded' | 'libheif' | 'refused', answer: string }>}
 */
async function outcome(bytes, label) {
  try {
    const result = await decodeShrunk(bytes, { factor: 2, maxPixels: 4e6 });
    if (!result) return { kind: 'libheif', answer: 'libheif' };
    assert.equal(result.rgb.length, result.width * result.height * 3, `${label}: whole RGB rows`);
    const digest = createHash('sha256').update(result.rgb).digest('hex');
    return { kind: 'decoded', answer: `${result.width}x${result.height} ${digest}` };
  } catch (err) {
    assert.equal(/** @type {{ status?: number }} */ (err).status, 400, `${label}: ${/** @type {Error} */ (err).stack}`);
    return { kind: 'refused', answer: '400' };
  }
}

test('mutated, cut and hostile files: a 400, or libheif decides, the same answer twice; never another failure', async () => {
  const single = heifEnc(await sharp(landscape).resize(160).toBuffer());
  const picture = pictureOf(single);
  const grid = heifFile([picture, picture, picture, picture], { columns: 2 });
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const outcomes = { decoded: 0, libheif: 0, refused: 0 };
  for (const [name, original] of /** @type {Array<[string, Buffer]>} */ ([
    ['single', single],
    ['grid', grid],
  ])) {
    for (let i = 0; i < 150; i += 1) {
      const bytes = Buffer.from(original);
      if (i % 5 === 0) {
        const cutAt = Math.floor(random() * bytes.length);
        bytes.fill(0, cutAt);
      } else {
        // a few bytes changed, most of them in the container's header (the first 1,000 bytes)
        for (let n = 0; n < 1 + (i % 4); n += 1) {
          const at = Math.floor(random() * (random() < 0.7 ? Math.min(1000, bytes.length) : bytes.length));
          bytes[at] = Math.floor(random() * 256);
        }
      }
      const first = await outcome(bytes, `${name} ${i}`);
      outcomes[first.kind] += 1;
      // the same bytes, the same answer, to the pixel (#51: fuzzed HEICs flipped between 400 and 200; what
      // libheif makes of them is checked through the origin, heic.test.js)
      assert.equal((await outcome(bytes, `${name} ${i}`)).answer, first.answer, `${name} ${i}: the same answer twice`);
    }
  }
  // the mutations reach every outcome: the test exercises the reader, not only its first check
  assert.ok(outcomes.decoded > 0 && outcomes.libheif > 0, JSON.stringify(outcomes));
  // and the unmutated files decode
  for (const original of [single, grid]) assert.ok(await decodeShrunk(original, { factor: 2, maxPixels: 4e6 }));
});

test('a picture larger than its container declares is refused before FFmpeg decodes it', async () => {
  // a 640 × 400 picture whose ispe claims 32 × 20: the pixel limit is checked against the claim
  const large = pictureOf(heifEnc(await sharp(photo('Path', '1280x800')).resize(640).jpeg().toBuffer(), 50));
  const decoder = /** @type {import('../src/heic/avcodec.js').HevcDecoder} */ (hevcDecoder());
  /** @type {number[][]} */
  const frames = [];
  // its HEVC stream in Annex B, parameter sets first, as the reader hands it to FFmpeg
  const stream = /** @type {import('../src/heic/container.js').HeifLayout} */ (heifLayout(heifFile([large]))).tiles[0]
    .data;
  const decodeWith = (/** @type {number} */ maxPixels) =>
    decoder.each([stream], (frame) => void frames.push([frame.width, frame.height]), { maxPixels });
  await assert.rejects(decodeWith(96 * 84));
  assert.deepEqual(frames, [], 'no frame decoded');
  await decodeWith(704 * 464);
  assert.deepEqual(frames, [[640, 400]], 'the same picture within its limit');
  const lying = heifFile([{ ...large, width: 32, height: 20 }]);
  assert.equal(await decodeShrunk(lying, { factor: 1, maxPixels: 1e6 }), null, "libheif's turn");
});
