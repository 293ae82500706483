
class Extension {
    enable() {
        this._undo = drawCodes(AuthPrompt.AuthPrompt.prototype);
    }

    disable() {
        this._undo?.();
        this._undo = null;
    }
}

function init() {
    return new Extension();
}
