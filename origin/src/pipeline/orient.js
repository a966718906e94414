// The orient step: the EXIF orientation applied to the pixels, what sharp's rotate() does from a file's
// metadata; pixels from the system's decoder carry none, so theirs is applied by hand.
import { imageOf } from './work.js';

/** @type {Record<number, [number, boolean, boolean]>} orientation: [angle, flip, flop] */
const TURNS = {
  1: [0, false, false],
  2: [0, false, true],
  3: [180, false, false],
  4: [0, true, false],
  5: [90, true, false],
  6: [90, false, false],
  7: [270, true, false],
  8: [270, false, false],
};

/** @param {import('./work.js').Work} work */
export async function orient(work) {
  let image = imageOf(work);
  if (work.orientation === 'auto') {
    work.image = image.rotate();
    return;
  }
  const [angle, flip, flop] = TURNS[work.orientation] || TURNS[1];
  if (angle) image = image.rotate(angle);
  if (flip) image = image.flip();
  if (flop) image = image.flop();
  work.image = image;
}
