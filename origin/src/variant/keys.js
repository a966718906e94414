// The result cache's names for variants: a key per source and request (what a takedown drops), and the
// extension a cached variant's format is kept under.
import { sha256Hex } from '@stack/lib';

const EXTENSIONS = { jpeg: 'jpg', png: 'png', webp: 'webp', gif: 'gif', avif: 'avif' };
/**
 * The extension of an animation's original kept as its variant (past the budgets: too costly to transform),
 * so a later answer from the cache says so as the first did.
 */
const PAST_BUDGET = { gif: 'agif', webp: 'awbp' };
/** Why a variant is its original's bytes: an animation too costly to transform. */
export const ANIMATION_PAST_BUDGET = 'animation_past_budget';

/**
 * The variant of `want` of `source`: a negotiated answer depends on the Accept class (match without
 * negotiation keeps its old key), a placeholder (blur) is its own.
 * @param {import('@stack/lib/src/sources.js').Source} source @param {import('../options.js').Want} want
 */
export function variantKey(source, want) {
  let format = want.format === 'auto' || want.negotiated ? `${want.format}-${want.accept}` : want.format;
  if (want.blur) format = 'blur';
  return sha256Hex(JSON.stringify([source.id, want.width, want.height, want.mode, format]));
}

/**
 * The extension a variant is kept under. @param {import('../pipeline/index.js').OutputFormat} format
 * @param {{ pastBudget?: boolean }} [options] pastBudget: an animation's original, too costly to transform
 */
export function extensionOf(format, { pastBudget = false } = {}) {
  if (pastBudget && (format === 'gif' || format === 'webp')) return PAST_BUDGET[format];
  return EXTENSIONS[format];
}

/** The format of a cached variant, and why it is its original's bytes ('' when it was made). @param {string} ext */
export function formatOfExt(ext) {
  if (ext === 'agif' || ext === 'awbp')
    return { format: ext === 'agif' ? 'gif' : 'webp', asOriginal: ANIMATION_PAST_BUDGET };
  return { format: ext === 'jpg' ? 'jpeg' : ext, asOriginal: '' };
}
