// Route parameters as strings: Express 5's types allow an array for each (a wildcard's segments), and no
// route of this stack names a wildcard parameter it reads.

/** @param {import('express').Request} req @returns {Record<string, string>} */
export const paramsOf = (req) => /** @type {Record<string, string>} */ (req.params);
