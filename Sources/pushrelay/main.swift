print("pushrelay")
