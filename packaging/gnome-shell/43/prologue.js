/* exported init */
const { Clutter, St } = imports.gi;
const AuthPrompt = imports.gdm.authPrompt;

