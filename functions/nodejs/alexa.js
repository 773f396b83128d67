'use strict';
// alexa (Desiccant's JavaScript set; ServerlessBench's eight-function Alexa skill chain): a
// smart-home voice request pipeline. Each request goes through the chain's stages, run here
// one after the other in this one function:
//   frontend  parse the JSON request envelope (the chain passes JSON between its functions)
//   interact  normalise the utterance, resolve synonyms, match an intent and extract its slots
//   route     hand the intent to the smart-home, reminder or fact skill
//   smarthome find the device in the home's registry (by room and kind)
//   devices   the door, light, plug, tv and thermostat handlers validate and update its state
//   reply     build the spoken answer (SSML) and the card, and serialise the response
// The home (`rooms` rooms and their devices) and `requests` utterances come from `seed`;
// `utterances` (a list of strings) replaces the generated ones.

const crypto = require('crypto');

function intParam(params, name, dflt, min, max) {
  const raw = params[name];
  const v = raw === undefined || raw === null ? dflt : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  }
  return v;
}

// mulberry32: a small seeded PRNG, so every run with the same seed replays the same requests.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ROOMS = ['kitchen', 'living room', 'bedroom', 'bathroom', 'office', 'hallway',
  'dining room', 'nursery', 'basement', 'guest room', 'attic', 'laundry room'];
const DOORS = ['front', 'back', 'garage', 'patio'];
const COLORS = ['white', 'warm white', 'red', 'green', 'blue', 'purple', 'orange'];
const SYNONYMS = [[/\b(lounge|family room)\b/g, 'living room'], [/\b(lamp|lights|bulb)\b/g, 'light'],
  [/\b(telly|television)\b/g, 'tv'], [/\b(socket|outlet)\b/g, 'plug'], [/\b(heating|heater)\b/g, 'thermostat'],
  [/\bswitch\b/g, 'turn'], [/\bwhat's\b/g, 'what is'], [/\bplease\b/g, ''], [/\s+/g, ' ']];
const FACTS = ['Honey never spoils.', 'Octopuses have three hearts.', 'A day on Venus is longer than its year.',
  'Bananas are berries, but strawberries are not.', 'The Eiffel Tower grows in summer.',
  'Wombat droppings are cube-shaped.', 'Sharks existed before trees.'];
const ROOM = `(?<room>${ROOMS.join('|')})`;
// Intent grammar, tried in order; named groups are the slots.
const INTENTS = [
  ['LightPower', new RegExp(`^turn (?<power>on|off) the ${ROOM} light$`)],
  ['LightDim', new RegExp(`^dim the ${ROOM} light to (?<level>\\d+) percent$`)],
  ['LightColor', new RegExp(`^set the ${ROOM} light to (?<color>${COLORS.join('|')})$`)],
  ['PlugPower', new RegExp(`^turn (?<power>on|off) the ${ROOM} plug$`)],
  ['TvPower', new RegExp(`^turn (?<power>on|off) the tv in the ${ROOM}$`)],
  ['TvChannel', new RegExp(`^change the ${ROOM} tv to channel (?<channel>\\d+)$`)],
  ['TvVolume', new RegExp(`^set the volume of the ${ROOM} tv to (?<volume>\\d+)$`)],
  ['SetTemperature', new RegExp(`^set the ${ROOM} thermostat to (?<degrees>\\d+) degrees$`)],
  ['GetTemperature', new RegExp(`^what is the temperature in the ${ROOM}$`)],
  ['DoorLock', new RegExp(`^(?<action>lock|unlock) the (?<door>${DOORS.join('|')}) door$`)],
  ['DoorStatus', new RegExp(`^is the (?<door>${DOORS.join('|')}) door locked$`)],
  ['Reminder', /^remind me to (?<task>[a-z ]+) at (?<hour>\d{1,2})(:(?<minute>\d{2}))? ?(?<ampm>am|pm)?$/],
  ['Fact', /^tell me a fact$/],
];

function buildHome(rooms, random) {
  const devices = new Map();
  const add = (room, kind, state) => devices.set(`${room}/${kind}`, { room, kind, ...state });
  for (const room of ROOMS.slice(0, rooms)) {
    add(room, 'light', { on: false, brightness: 100, color: 'white' });
    if (random() < 0.6) add(room, 'plug', { on: random() < 0.5, watts: 0 });
    if (random() < 0.4) add(room, 'tv', { on: false, channel: 1, volume: 10 });
    if (random() < 0.7) add(room, 'thermostat', { target: 20, current: 17 + Math.floor(random() * 8) });
  }
  for (const door of DOORS.slice(0, 3)) add(door, 'door', { locked: true });
  return devices;
}

function generateUtterances(count, home, random) {
  const pick = (list) => list[Math.floor(random() * list.length)];
  const n = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));
  const roomsWith = {};
  for (const d of home.values()) (roomsWith[d.kind] || (roomsWith[d.kind] = [])).push(d.room);
  // Mostly rooms that have such a device, sometimes one that has not (the skill says so).
  const room = (kind) => (random() < 0.9 && roomsWith[kind] ? pick(roomsWith[kind]) : pick(ROOMS));
  const templates = [
    () => `Turn ${pick(['on', 'off'])} the ${room('light')} ${pick(['light', 'lamp', 'lights'])}`,
    () => `Dim the ${room('light')} light to ${n(0, 120)} percent`,
    () => `Set the ${room('light')} light to ${pick(COLORS)}`,
    () => `Switch ${pick(['on', 'off'])} the ${room('plug')} ${pick(['plug', 'socket'])}`,
    () => `Turn ${pick(['on', 'off'])} the ${pick(['tv', 'telly'])} in the ${room('tv')}`,
    () => `Change the ${room('tv')} tv to channel ${n(1, 120)}`,
    () => `Set the volume of the ${room('tv')} tv to ${n(0, 110)}`,
    () => `Please set the ${room('thermostat')} ${pick(['thermostat', 'heating'])} to ${n(10, 35)} degrees`,
    () => `What's the temperature in the ${room('thermostat')}?`,
    () => `${pick(['Lock', 'Unlock'])} the ${pick(DOORS)} door`,
    () => `Is the ${pick(DOORS)} door locked?`,
    () => `Remind me to ${pick(['water the plants', 'call mom', 'take out the trash', 'feed the cat'])} at ${n(1, 12)}${pick(['', ':15', ':30'])} ${pick(['am', 'pm'])}`,
    () => 'Tell me a fact',
    () => `Play ${pick(['jazz', 'the news', 'rain sounds'])} in the ${pick(ROOMS)}`, // no such skill
  ];
  return Array.from({ length: count }, () => pick(templates)());
}

// frontend: the request as the voice service would post it.
function frontend(text, index) {
  const body = JSON.stringify({ version: '1.0', session: { sessionId: `session-${index >> 4}`, new: index % 16 === 0 },
    request: { type: 'IntentRequest', requestId: `request-${index}`, locale: 'en-US', utterance: text } });
  return JSON.parse(body);
}

function interact(envelope) {
  let text = envelope.request.utterance.toLowerCase().replace(/[?!.,]/g, '');
  for (const [pattern, replacement] of SYNONYMS) text = text.replace(pattern, replacement);
  text = text.trim();
  for (const [intent, grammar] of INTENTS) {
    const match = grammar.exec(text);
    if (match) return { intent, slots: { ...match.groups }, text };
  }
  return { intent: 'Unknown', slots: {}, text };
}

const speech = (ok, text) => ({ ok, text });

function device(home, room, kind) {
  const d = home.get(`${room}/${kind}`);
  if (!d) {
    const what = kind === 'door' ? `${room} door` : `${kind} in the ${room}`;
    throw Object.assign(new Error(`There is no ${what}.`), { userFacing: true });
  }
  return d;
}

// The device handlers: each validates its slots, updates the state and says what happened.
const HANDLERS = {
  LightPower: (home, s) => { const d = device(home, s.room, 'light'); d.on = s.power === 'on'; return speech(true, `The ${s.room} light is ${s.power}.`); },
  LightDim: (home, s) => {
    const level = Number(s.level);
    if (level > 100) return speech(false, 'Brightness goes from 0 to 100 percent.');
    const d = device(home, s.room, 'light');
    Object.assign(d, { brightness: level, on: level > 0 });
    return speech(true, `Dimming the ${s.room} light to ${level} percent.`);
  },
  LightColor: (home, s) => { const d = device(home, s.room, 'light'); Object.assign(d, { color: s.color, on: true }); return speech(true, `The ${s.room} light is now ${s.color}.`); },
  PlugPower: (home, s) => { const d = device(home, s.room, 'plug'); d.on = s.power === 'on'; d.watts = d.on ? 60 : 0; return speech(true, `The ${s.room} plug is ${s.power}.`); },
  TvPower: (home, s) => { const d = device(home, s.room, 'tv'); d.on = s.power === 'on'; return speech(true, `Turning the ${s.room} tv ${s.power}.`); },
  TvChannel: (home, s) => {
    const d = device(home, s.room, 'tv');
    const channel = Number(s.channel);
    if (channel > 99) return speech(false, `Channel ${channel} does not exist.`);
    Object.assign(d, { channel, on: true });
    return speech(true, `Switching the ${s.room} tv to channel ${channel}.`);
  },
  TvVolume: (home, s) => {
    const d = device(home, s.room, 'tv');
    const volume = Number(s.volume);
    if (volume > 100) return speech(false, 'Volume goes from 0 to 100.');
    d.volume = volume;
    return speech(true, `The ${s.room} tv volume is ${volume}.`);
  },
  SetTemperature: (home, s) => {
    const degrees = Number(s.degrees);
    if (degrees < 12 || degrees > 30) return speech(false, 'I can only set between 12 and 30 degrees.');
    device(home, s.room, 'thermostat').target = degrees;
    return speech(true, `Setting the ${s.room} to ${degrees} degrees.`);
  },
  GetTemperature: (home, s) => { const d = device(home, s.room, 'thermostat'); return speech(true, `It is ${d.current} degrees in the ${s.room}; the target is ${d.target}.`); },
  DoorLock: (home, s) => { const d = device(home, s.door, 'door'); d.locked = s.action === 'lock'; return speech(true, `The ${s.door} door is ${s.action}ed.`); },
  DoorStatus: (home, s) => { const d = device(home, s.door, 'door'); return speech(true, `The ${s.door} door is ${d.locked ? 'locked' : 'unlocked'}.`); },
};

function reminder(reminders, s) {
  let hour = Number(s.hour) % 12 + (s.ampm === 'pm' ? 12 : 0);
  if (!s.ampm && Number(s.hour) === 12) hour = 12;
  const minute = Number(s.minute || 0);
  if (Number(s.hour) > 12 || minute > 59) return speech(false, 'That is not a time I understand.');
  const at = hour * 60 + minute;
  // Keep the list ordered by time: binary search for the insertion point.
  let lo = 0;
  let hi = reminders.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (reminders[mid].at <= at) lo = mid + 1; else hi = mid; }
  reminders.splice(lo, 0, { at, task: s.task });
  const clock = `${String(hour).padStart(2, '0')}:${String(minute).padStart(2, '0')}`;
  return speech(true, `OK, I will remind you to ${s.task} at ${clock}.`);
}

function route(home, reminders, parsed, index) {
  const { intent, slots } = parsed;
  if (intent === 'Fact') return speech(true, FACTS[index % FACTS.length]);
  if (intent === 'Reminder') return reminder(reminders, slots);
  const handler = HANDLERS[intent];
  if (!handler) return speech(false, "Sorry, I don't know how to help with that.");
  try {
    return handler(home, slots);
  } catch (err) {
    if (err.userFacing) return speech(false, err.message);
    throw err;
  }
}

function reply(envelope, parsed, outcome) {
  const escaped = outcome.text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  return JSON.stringify({ version: '1.0', requestId: envelope.request.requestId,
    response: { outputSpeech: { type: 'SSML', ssml: `<speak>${escaped}</speak>` },
      card: { type: 'Simple', title: parsed.intent, content: outcome.text },
      shouldEndSession: !outcome.ok } });
}

function main(params = {}) {
  const seed = intParam(params, 'seed', 42, 0, 2 ** 32 - 1);
  const rooms = intParam(params, 'rooms', 8, 1, ROOMS.length);
  const random = rng(seed);
  const home = buildHome(rooms, random);
  let utterances;
  if (params.utterances !== undefined) {
    if (!Array.isArray(params.utterances) || !params.utterances.every((u) => typeof u === 'string')) {
      throw new TypeError('utterances must be a list of strings');
    }
    utterances = params.utterances;
  } else {
    utterances = generateUtterances(intParam(params, 'requests', 4000, 0, 1000000), home, random);
  }

  const reminders = [];
  const intents = {};
  const digest = crypto.createHash('sha256');
  const replies = [];
  let handled = 0;
  utterances.forEach((text, i) => {
    const envelope = frontend(text, i);
    const parsed = interact(envelope);
    const outcome = route(home, reminders, parsed, i);
    const body = reply(envelope, parsed, outcome);
    intents[parsed.intent] = (intents[parsed.intent] || 0) + 1;
    if (outcome.ok) handled++;
    digest.update(body);
    if (replies.length < 5) replies.push(outcome.text);
  });

  const all = [...home.values()];
  const of = (kind) => all.filter((d) => d.kind === kind);
  return {
    requests: utterances.length,
    handled,
    failed: utterances.length - handled,
    intents,
    home: {
      devices: all.length,
      lights_on: of('light').filter((d) => d.on).length,
      tvs_on: of('tv').filter((d) => d.on).length,
      plugs_on: of('plug').filter((d) => d.on).length,
      doors_locked: of('door').filter((d) => d.locked).length,
      thermostat_targets: Object.fromEntries(of('thermostat').map((d) => [d.room, d.target])),
    },
    reminders: reminders.length,
    next_reminder: reminders[0] ? reminders[0].task : null,
    first_replies: replies,
    replies_sha256: digest.digest('hex'),
  };
}

module.exports = { main };
