// A KafkaJS consumer group member, driven by tests/security/test_kafkajs_sasl.py.
//
// Reads one JSON object from argv[2]: {brokers, clientId, sasl: {mechanism, username, password} | null,
// ca: PEM path | null, topic, group, messages, holdMs}. Creates `topic` (one partition) with the admin client,
// produces `messages` records to it, joins `group`,
// consumes them, commits each one's next offset by hand, stays in the group `holdMs` more (heartbeating, committing
// again: long enough for a re-authentication when the listener has connections.max.reauth.ms), then reads the
// committed offsets back with the admin client and leaves.
// Prints one JSON line: {"ok": true, consumed, committed} or {"ok": false, name, type, message}; exits 0 or 1.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const config = JSON.parse(process.argv[2])

function kafkaClient () {
  const options = {
    clientId: config.clientId,
    brokers: config.brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5000,
    authenticationTimeout: 5000,
    retry: { retries: config.retries === undefined ? 3 : config.retries, initialRetryTime: 200 }
  }
  if (config.ca) {
    options.ssl = { ca: [fs.readFileSync(config.ca, 'utf-8')], rejectUnauthorized: true }
  }
  if (config.sasl) {
    options.sasl = config.sasl
  }
  return new Kafka(options)
}

async function main () {
  const kafka = kafkaClient()
  const setup = kafka.admin()
  await setup.connect()
  await setup.createTopics({ topics: [{ topic: config.topic, numPartitions: 1 }], waitForLeaders: true })
  await setup.disconnect()
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < config.messages; i++) {
    messages.push({ key: `k${i}`, value: `v${i}`, partition: 0 })
  }
  await producer.send({ topic: config.topic, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: config.group, sessionTimeout: 6000, heartbeatInterval: 300 })
  let consumed = 0
  let lastOffset = -1
  let resolveDone
  const done = new Promise((resolve) => { resolveDone = resolve })
  let crashed = null
  consumer.on(consumer.events.CRASH, (event) => { crashed = event.payload.error; resolveDone() })
  await consumer.connect()
  await consumer.subscribe({ topics: [config.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      consumed += 1
      lastOffset = Number(message.offset)
      await consumer.commitOffsets([{ topic, partition, offset: String(lastOffset + 1) }])
      if (consumed >= config.messages) resolveDone()
    }
  })
  const timeout = setTimeout(() => { crashed = new Error('timed out waiting for the messages'); resolveDone() }, 30000)
  await done
  clearTimeout(timeout)
  if (crashed) throw crashed
  const holdUntil = Date.now() + (config.holdMs || 0)
  while (Date.now() < holdUntil) {
    await new Promise((resolve) => setTimeout(resolve, 250))
    await consumer.commitOffsets([{ topic: config.topic, partition: 0, offset: String(lastOffset + 1) }])
    if (crashed) throw crashed
  }
  const admin = kafka.admin()
  await admin.connect()
  const fetched = await admin.fetchOffsets({ groupId: config.group, topics: [config.topic] })
  await admin.disconnect()
  await consumer.disconnect()
  const committed = fetched[0].partitions.filter((p) => p.partition === 0).map((p) => Number(p.offset))
  return { ok: true, consumed, committed: committed[0] }
}

main().then(
  (result) => { console.log(JSON.stringify(result)); process.exit(0) },
  (e) => {
    console.log(JSON.stringify({ ok: false, name: e.name, type: e.type || null, message: e.message }))
    process.exit(1)
  }
)
