// The REST API's response shapes, one module per route family.
export * from './common.js';
