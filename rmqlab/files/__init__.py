"""rmqlab.files"""
