/**
 * ALLOWED_SIZES as numbers, ascending, each a whole number of pixels from 1 to MAX_DIMENSION (else an error
 * naming the bad one). The origin makes only these sizes and varnish keys on them (infra/render.js).
 * @param {string[]} list the setting @param {number} cap MAX_DIMENSION @returns {number[]}
 */
export function allowedSizeList(list, cap) {
  const sizes = list.map(Number).sort((a, b) => a - b);
  const bad = sizes.find((size) => !Number.isInteger(size) || size < 1 || size > cap);
  if (bad !== undefined)
    throw new Error(`ALLOWED_SIZES: ${bad} is not a whole number of pixels from 1 to MAX_DIMENSION (${cap})`);
  return sizes;
}
