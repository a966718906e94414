// What the Hive frontends ask of one photograph (#48): condenser's post body at 768 wide and its 2x 1536, its
// feed boxes 256 × 512 and 640 × 480; ecency's srcset widths, fit. The kept-pixels test and bench/post ask it.

/** @type {Array<Record<string, string | number>>} */
export const FRONTEND_SET = [
  { width: 768, format: 'match', mode: 'fit' },
  { width: 1536, format: 'match', mode: 'fit' },
  { width: 256, height: 512 },
  { width: 640, height: 480 },
  ...[320, 600, 800, 1024, 1280].map((width) => ({ width, format: 'match', mode: 'fit' })),
];
