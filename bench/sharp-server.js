// The minimal sharp server bench/scale compares the origin with: what a weekend's image resizer is (the
// originals on local disk, sharp's defaults, no cache, no queue). GET /<i>/<width>x<height>.<format> answers
// file i fit inside the box, in jpeg (q80), webp (q80) or avif (q50).
//   node bench/sharp-server.js <port> <file>...
import http from 'node:http';
import sharp from 'sharp';

sharp.cache(false);
const [port, ...files] = process.argv.slice(2);
const ENCODERS = {
  jpeg: (/** @type {import('sharp').Sharp} */ image) => image.jpeg({ quality: 80 }),
  webp: (/** @type {import('sharp').Sharp} */ image) => image.webp({ quality: 80 }),
  avif: (/** @type {import('sharp').Sharp} */ image) => image.avif({ quality: 50, effort: 4 }),
};

http
  .createServer(async (req, res) => {
    const match = /^\/(\d+)\/(\d+)x(\d+)\.(jpeg|webp|avif)$/.exec(req.url || '');
    const file = match && files[Number(match[1]) % files.length];
    if (!match || !file) return res.writeHead(404).end();
    try {
      const image = sharp(file)
        .rotate()
        .resize(Number(match[2]), Number(match[3]), { fit: 'inside', withoutEnlargement: true });
      const body = await ENCODERS[/** @type {keyof typeof ENCODERS} */ (match[4])](image).toBuffer();
      res.writeHead(200, { 'content-type': `image/${match[4]}` }).end(body);
    } catch (err) {
      res.writeHead(500).end(String(/** @type {Error} */ (err).message));
    }
  })
  .listen(Number(port), '127.0.0.1', () => process.stdout.write('listening\n'));
