export { startChannelConnector } from './service.js';
