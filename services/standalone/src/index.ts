export { startStandalone } from './standalone.js';
