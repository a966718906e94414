// The resize step. From the file or from pixels decoded at a DCT scale, sharp works out the size from what it
// has decoded (as after its own shrink-on-load), so every decoder gives the same size and crop. A placeholder
// (plan.blur) is blurred once it is small: a gaussian of BLUR_SIGMA over 20 pixels costs nothing.
import { imageOf } from './work.js';

/** ecency's placeholder blur (its imagehoster: `.blur(2)` on the 20-px image): soft, the shapes still there. */
const BLUR_SIGMA = 2;

/** @param {import('./work.js').Work} work */
export async function resize(work) {
  const { plan: p, options } = work;
  if (work.sharedResize) return; // resized already, for another format of this size
  work.image = imageOf(work).resize({
    width: p.width,
    height: p.height,
    fit: p.fit,
    position: 'centre',
    withoutEnlargement: true,
    kernel: options.kernel,
  });
  if (p.blur) work.image = work.image.blur(BLUR_SIGMA);
}
