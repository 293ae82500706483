import Clutter from 'gi://Clutter';
import St from 'gi://St';
import * as AuthPrompt from 'resource:///org/gnome/shell/gdm/authPrompt.js';
import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';

