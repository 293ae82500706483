/// The one stylesheet: readable at phone size (about 390×844) and on a desktop.
enum Stylesheet {
    static let source = """
        :root { color-scheme: light dark; --accent: #0b57d0; --error: #b3261e; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 17px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
        main { max-width: 34rem; margin: 0 auto; padding: 1.25rem 1rem 3rem; }
        h1 { font-size: 1.5rem; margin: 0.5rem 0 1rem; }
        h2 { font-size: 1.15rem; }
        label { display: block; font-weight: 600; margin: 1rem 0 0.35rem; }
        input, select { width: 100%; font: inherit; font-size: 1.2rem; padding: 0.6rem 0.7rem; border: 1px solid #8a8a8a; border-radius: 0.5rem; }
        input:focus, select:focus, button:focus { outline: 3px solid var(--accent); outline-offset: 2px; }
        button { font: inherit; font-weight: 600; margin-top: 1.25rem; padding: 0.75rem 1.25rem; min-height: 3rem; width: 100%;
                 border: 0; border-radius: 0.5rem; background: var(--accent); color: #fff; cursor: pointer; }
        button.secondary { background: transparent; color: var(--accent); border: 2px solid var(--accent); }
        button:disabled { opacity: 0.5; cursor: wait; }
        .buttons { display: grid; grid-template-columns: 1fr 1fr; gap: 0.75rem; }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.3rem 1rem; margin: 0 0 0.5rem; }
        dt { font-weight: 600; }
        dd { margin: 0; overflow-wrap: anywhere; }
        .error { color: var(--error); font-weight: 600; }
        .error:empty, #status:empty { display: none; }
        [hidden] { display: none !important; }
        ul { list-style: none; padding: 0; margin: 0; }
        li { border: 1px solid #c4c4c4; border-radius: 0.5rem; padding: 0.75rem; margin: 0.5rem 0; }
        li button { margin-top: 0.5rem; }
        li a { font-weight: 600; color: var(--accent); }
        #status { font-weight: 600; }
        """
}
