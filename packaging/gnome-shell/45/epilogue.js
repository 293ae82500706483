
export default class XignQrExtension extends Extension {
    enable() {
        this._undo = drawCodes(AuthPrompt.AuthPrompt.prototype);
    }

    disable() {
        this._undo?.();
        this._undo = null;
    }
}
