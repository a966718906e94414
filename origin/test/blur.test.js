// #49: ecency's feeds ask `blur=1` (render-helper proxifyImageSrc) for a placeholder shown while the image
// loads: a JPEG at most 20 pixels wide, under 2 KB, blurred, one per source whatever size and format were asked
// beside it, for a photograph, an animated GIF and a PNG with transparency alike.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { photo } from '../../test/support/images.js';
import { startOrigin } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
before(async () => {
  origin = await startOrigin();
});
after(() => origin?.stop());

const CHROME = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';

/** How much neighbouring pixels differ, on average: what a blur takes away. @param {Buffer} image */
async function edges(image) {
  const { data, info } = await sharp(image).greyscale().raw().toBuffer({ resolveWithObject: true });
  let sum = 0;
  for (let y = 0; y < info.height; y += 1)
    for (let x = 1; x < info.width; x += 1) sum += Math.abs(data[y * info.width + x] - data[y * info.width + x - 1]);
  return sum / (info.height * (info.width - 1));
}

/** @param {string} url @param {Record<string, string>} [headers] */
async function get(url, headers = {}) {
  const response = await fetch(url, { headers });
  return { response, body: Buffer.from(await response.arrayBuffer()) };
}

/** Sources of three kinds, 640 wide, of one photograph. */
async function sources() {
  const still = sharp(photo('Path', '1280x800')).resize(640);
  const frames = await Promise.all(
    [0, 1, 2].map((i) =>
      sharp(photo('Path', '1280x800'))
        .extract({ left: i * 100, top: 0, width: 640, height: 400 })
        .raw()
        .toBuffer(),
    ),
  );
  const gif = await sharp(Buffer.concat(frames), { raw: { width: 640, height: 1200, channels: 3 } })
    .gif({ loop: 0, delay: [100, 100, 100] })
    .toBuffer()
    .then((flat) => sharp(flat, { pages: -1 }).toBuffer()); // three frames of 400 rows
  const png = await still.clone().ensureAlpha(0.6).png().toBuffer();
  return {
    photograph: origin.site.add('photo.jpg', await still.clone().jpeg().toBuffer()),
    animation: origin.site.add('anim.gif', await sharp(gif, { pages: -1 }).gif().toBuffer()),
    transparent: origin.site.add('alpha.png', png),
  };
}

test('blur=1: a JPEG placeholder at most 20 pixels wide, under 2 KB, blurred, of a photograph, a GIF and a PNG', async () => {
  for (const [kind, url] of Object.entries(await sources())) {
    const placeholder = await get(origin.proxied(url, { blur: 1, format: 'match', mode: 'fit', width: 600 }), {
      accept: CHROME,
    });
    assert.equal(placeholder.response.status, 200, `${kind}: ${placeholder.body}`);
    assert.equal(placeholder.response.headers.get('content-type'), 'image/jpeg', kind);
    const meta = await sharp(placeholder.body).metadata();
    assert.equal(meta.format, 'jpeg', kind);
    assert.equal(meta.width, 20, `${kind}: 20 pixels wide`);
    assert.ok(placeholder.body.length < 2048, `${kind}: ${placeholder.body.length} bytes`);
    assert.equal(placeholder.response.headers.get('vary'), null, `${kind}: one placeholder whatever the Accept`);
    assert.match(String(placeholder.response.headers.get('cache-control')), /max-age=\d{6,}/, kind);
    // the same placeholder under every spelling of it
    const other = await get(origin.proxied(url, { blur: 'true' }));
    assert.equal(other.response.headers.get('etag'), placeholder.response.headers.get('etag'), kind);
    // blurred: its edges are softer than those of the same size made without it
    const sharpVariant = await get(origin.proxied(url, { width: 20, format: 'jpeg', mode: 'fit' }));
    assert.equal(sharpVariant.response.status, 200);
    const [soft, crisp] = [await edges(placeholder.body), await edges(sharpVariant.body)];
    assert.ok(soft < crisp * 0.8, `${kind}: edges ${soft.toFixed(1)} blurred against ${crisp.toFixed(1)}`);
  }
});

test('blur=0 or any other value is no placeholder: the size asked', async () => {
  const url = (await sources()).photograph;
  const asked = await get(origin.proxied(url, { blur: 0, width: 300, format: 'jpeg' }));
  assert.equal((await sharp(asked.body).metadata()).width, 300);
});
