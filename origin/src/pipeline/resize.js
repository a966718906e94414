// The resize step. From the file or from pixels decoded at a DCT scale, sharp works out the size from what it
// has decoded (as after its own shrink-on-load), so every decoder gives the same size and crop.
import { imageOf } from './work.js';

/** @param {import('./work.js').Work} work */
export async function resize(work) {
  const { plan: p, options } = work;
  work.image = imageOf(work).resize({
    width: p.width,
    height: p.height,
    fit: p.fit,
    position: 'centre',
    withoutEnlargement: true,
    kernel: options.kernel,
  });
}
