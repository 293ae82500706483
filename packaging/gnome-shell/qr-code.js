// pam_xign sends the QR code of a login to approve as text: half-block characters, two modules a character. GDM and
// the lock screen show messages in a proportional font, where no camera can read it. This draws the same modules as
// an image under the message, and leaves the message's words (the host, the link, the code) as they are.
// The packages' build puts the shell's own prologue (imports) before this and its epilogue (the extension) after it:
// 43/ for GNOME Shell 43-44, a script; 45/ for 45-50, an ECMAScript module.

// What each character paints: the upper module and the lower one, dark where the character is drawn.
const GLYPHS = new Map([[' ', [false, false]], ['\u2580', [true, false]], ['\u2584', [false, true]], ['\u2588', [true, true]]]);
const MODULE_PIXELS = 4;
// A version 1 code with its quiet zone is 29 modules; the module never draws one above version 10 (65 with it).
const SIDES = { min: 21, max: 80 };

/** The code's modules and the message without it, or null where the message holds no code. */
function splitCode(message) {
    const rows = [];
    const words = [];
    for (const line of message.split('\n')) {
        const characters = [...line];
        if (characters.length >= SIDES.min && characters.length <= SIDES.max && characters.every(c => GLYPHS.has(c)))
            rows.push(characters);
        else
            words.push(line);
    }
    const side = rows.length ? rows[0].length : 0;
    if (rows.length < SIDES.min / 2 || rows.some(row => row.length !== side))
        return null;
    const modules = [];
    for (const row of rows) {
        modules.push(row.map(c => GLYPHS.get(c)[0]));
        modules.push(row.map(c => GLYPHS.get(c)[1]));
    }
    return { modules, text: words.join('\n').trim() };
}

function codeImage(modules) {
    const image = new St.DrawingArea({
        width: modules[0].length * MODULE_PIXELS,
        height: modules.length * MODULE_PIXELS,
        x_align: Clutter.ActorAlign.CENTER,
    });
    image.connect('repaint', area => {
        const cr = area.get_context();
        cr.setSourceRGB(1, 1, 1);
        cr.paint();
        cr.setSourceRGB(0, 0, 0);
        modules.forEach((row, y) => row.forEach((dark, x) => {
            if (dark)
                cr.rectangle(x * MODULE_PIXELS, y * MODULE_PIXELS, MODULE_PIXELS, MODULE_PIXELS);
        }));
        cr.fill();
        cr.$dispose();
    });
    return image;
}

/** Makes `prompt` (AuthPrompt's prototype) draw codes; returns what undoes it. */
function drawCodes(prompt) {
    const setMessage = prompt.setMessage;
    prompt.setMessage = function (message, ...rest) {
        this._xignCode?.destroy();
        this._xignCode = null;
        const code = message ? splitCode(message) : null;
        if (code) {
            this._xignCode = codeImage(code.modules);
            this.add_child(this._xignCode);
            message = code.text;
        }
        return setMessage.call(this, message, ...rest);
    };
    return () => {
        prompt.setMessage = setMessage;
    };
}
